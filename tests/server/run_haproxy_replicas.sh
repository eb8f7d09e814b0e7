#!/usr/bin/env bash
# Two `strata serve` replicas behind HAProxy, run with the committed deploy/haproxy/haproxy.cfg
# (the addresses given through its environment variables), as issue 39 asks:
#   - requests without a conversation key spread over both replicas;
#   - a conversation (the X-Conversation-Id header, else the body's "user") stays on one replica;
#   - a replica stopped with SIGTERM under traffic drains: its /health says 503 "draining", a
#     request stuck to it is retried on the other one, its running stream finishes, it exits 0,
#     no request HAProxy accepted fails, and later requests go to the other replica.
# Each replica is counted through its own /metrics (and its request log).
#   run_haproxy_replicas.sh STRATA MAKE_SYNTHETIC_MODEL WORK_DIR
set -euo pipefail
strata=$1 make_model=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
config=$here/../../deploy/haproxy/haproxy.cfg
# shellcheck source=tests/server/serve_helpers.sh
source "$here/serve_helpers.sh"
command -v haproxy > /dev/null || { echo "haproxy is not installed (scripts/setup.sh)" >&2; exit 1; }
mkdir -p "$work"
model=$work/haproxy-model.gguf
# Written under a temporary name and renamed: tests running at once may share the folder.
if [[ ! -f $model ]]; then
  "$make_model" --byte-vocab --vocab 512 --layers 2 -o "$model.$$" > /dev/null 2>&1
  mv -f "$model.$$" "$model"
fi
log1=$work/haproxy-replica1.log log2=$work/haproxy-replica2.log lb_log=$work/haproxy.log
rm -f "$work/drain-streaming" "$work/replica1-exited"

pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
}
trap cleanup EXIT
fail() {
  local f
  for f in "$log1" "$log2" "$lb_log"; do
    echo "==== $f (last lines)"
    tail -n 40 "$f" || true
  done
  echo "haproxy replicas: $*" >&2
  exit 1
}

# start_replica LOG: a replica on a free port (its own cache), a child of this shell (serve_stop
# waits for it); sets replica_pid and replica_port.
start_replica() {
  local log=$1
  XDG_CACHE_HOME=${log%.log}-cache "$strata" serve -m "$model" --host 127.0.0.1 --port 0 \
    --parallel 2 -t 1 --ctx 8192 --shutdown-grace 60 2> "$log" &
  replica_pid=$!
  pids+=("$replica_pid")
  replica_port=""
  for _ in $(seq 1 300); do
    replica_port=$(grep -o 'http://127.0.0.1:[0-9]*/v1' "$log" | head -1 | cut -d: -f3 || true)
    [[ -n $replica_port ]] && break
    kill -0 "$replica_pid" 2> /dev/null || fail "a replica exited at start"
    sleep 0.1
  done
  [[ -n $replica_port ]] || fail "a replica did not start"
  replica_port=${replica_port%/v1}
}
start_replica "$log1"
pid1=$replica_pid port1=$replica_port
start_replica "$log2"
pid2=$replica_pid port2=$replica_port
read -r lb_port stats_port < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')
STRATA_LB_BIND=127.0.0.1:$lb_port STRATA_LB_STATS_BIND=127.0.0.1:$stats_port \
  STRATA_REPLICA1=127.0.0.1:$port1 STRATA_REPLICA2=127.0.0.1:$port2 \
  haproxy -db -f "$config" > "$lb_log" 2>&1 &
lb_pid=$!
pids+=("$lb_pid")
echo "replicas on ports $port1 and $port2, haproxy on $lb_port (stats $stats_port)"

client=$work/haproxy_client.py
cat > "$client" <<'PY'
import json, os, sys, threading, time, urllib.error, urllib.request

lb, r1, r2, stats, work = sys.argv[2:7]
replicas = {"replica1": r1, "replica2": r2}
http = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, never a proxy


def request(url, body=None, headers=None, timeout=120):
    """(status, body text); a refused connection is status 0."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data, {"Content-Type": "application/json", **(headers or {})})
    try:
        with http.open(req, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")
    except (ConnectionError, urllib.error.URLError):
        return 0, ""


def chat_count(name):
    """Chat requests a replica has counted (its own /metrics)."""
    status, text = request(f"http://{replicas[name]}/metrics")
    assert status == 200, (name, status)
    for line in text.splitlines():
        if line.startswith('strata_requests_total{endpoint="chat_completions"}'):
            return int(float(line.split()[-1]))
    raise AssertionError("no chat counter in /metrics of " + name)


def counts(names=tuple(replicas)):
    return {n: chat_count(n) for n in names}


def chat(headers=None, user=None, tokens=2):
    body = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": tokens}
    if user is not None:
        body["user"] = user
    status, text = request(f"http://{lb}/v1/chat/completions", body, headers)
    assert status == 200, ("chat through haproxy", status, text)


def where(send, n, names=tuple(replicas)):
    """Sends n requests one after another; returns the chat requests each replica got."""
    before = counts(names)
    for _ in range(n):
        send()
    after = counts(names)
    return {k: after[k] - before[k] for k in names}


def server_states():
    """HAProxy's view of the replicas: {name: "UP"/"DOWN"/...} from its stats CSV."""
    status, text = request(f"http://{stats}/;csv")
    assert status == 200, status
    rows = [line.split(",") for line in text.splitlines()]
    head = rows[0]
    head[0] = head[0].lstrip("# ")
    out = {}
    for row in rows[1:]:
        rec = dict(zip(head, row))
        if rec.get("pxname") == "strata_replicas" and rec.get("svname") in replicas:
            out[rec["svname"]] = rec["status"]
    return out


def wait_up():
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if set(server_states().values()) == {"UP"}:
                print("ok   haproxy sees both replicas UP (GET /health every 2 s)")
                return
        except AssertionError:
            pass
        time.sleep(0.2)
    raise AssertionError("the replicas did not come UP in haproxy: %s" % server_states())


def spread():
    got = where(chat, 6)
    print("     6 requests without a key: %s" % got)
    assert all(v > 0 for v in got.values()) and sum(got.values()) == 6, got
    print("ok   requests without a conversation key spread over both replicas")


def sticky():
    cases = [("header X-Conversation-Id: conv-a", "conv-a", None),
             ("header X-Conversation-Id: conv-b", "conv-b", None),
             ('body "user": "alice"', None, "alice"),
             ('body "user": "bob"', None, "bob")]
    home = {}  # key -> the replica its requests went to
    for what, header, user in cases:
        got = where(lambda: chat({"X-Conversation-Id": header} if header else None, user), 5)
        print("     5 requests with %s: %s" % (what, got))
        assert sorted(got.values()) == [0, 5], (what, got)
        home[header or user] = max(got, key=got.get)
    # Both keys in one request: the header wins.
    pairs = [(h, u) for h in ("conv-a", "conv-b") for u in ("alice", "bob") if home[h] != home[u]]
    if pairs:
        h, u = pairs[0]
        got = where(lambda: chat({"X-Conversation-Id": h}, u), 3)
        assert got[home[h]] == 3, (h, u, home, got)
        print("     3 requests with header %s and user %s: %s (the header wins)" % (h, u, got))
    print("ok   each conversation stays on one replica (header, else the body's user field)")


def drain():
    # A conversation stuck to replica1, to send to it through haproxy.
    key = None
    for i in range(10):
        k = "drain-%d" % i
        if where(lambda: chat({"X-Conversation-Id": k}), 1)["replica1"] == 1:
            key = k
            break
    assert key, "no conversation key landed on replica1"
    # A stream long enough to still run while replica1 drains, yet done well within its 60 s
    # grace: twice the length of a request that took at least 1 s here (slow builds get fewer
    # tokens). Measured at full length because each token attends to all before it, so a rate
    # taken over a few hundred tokens overstates a few thousand (an ASan build ran 15x slower at
    # depth 6000 than at 300).
    long_tokens = 300
    while long_tokens < 7500:
        t0 = time.time()
        status, _ = request(f"http://{r1}/v1/completions",
                            {"prompt": "x", "max_tokens": long_tokens, "ignore_eos": True,
                             "spec": "off"})
        assert status == 200, status
        if time.time() - t0 >= 1:
            break
        long_tokens *= 2
    long_tokens = min(long_tokens * 2, 7500)
    print("     the long stream: %d tokens" % long_tokens)

    results, lock = [], threading.Lock()
    long_run = {"status": None, "done": False, "finish": None, "chunks": 0}

    def long_stream():
        body = {"prompt": "x", "max_tokens": long_tokens, "ignore_eos": True, "stream": True,
                "spec": "off"}
        req = urllib.request.Request(f"http://{lb}/v1/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json",
                                      "X-Conversation-Id": key})
        try:
            with http.open(req, timeout=300) as r:
                long_run["status"] = r.status
                for raw in r:
                    line = raw.decode("utf-8", "replace").strip()
                    if line == "data: [DONE]":
                        long_run["done"] = True
                    elif line.startswith("data: "):
                        long_run["chunks"] += 1
                        if long_run["chunks"] == 5:
                            streaming.set()
                        choice = json.loads(line[6:])["choices"][0]
                        long_run["finish"] = choice.get("finish_reason") or long_run["finish"]
        except urllib.error.HTTPError as e:
            long_run["status"] = e.code

    streaming = threading.Event()
    stuck = []  # (status, finish_reason) of the requests run or queued on replica1 at SIGTERM

    def stuck_request():
        body = {"prompt": "z", "max_tokens": max(long_tokens // 4, 50), "ignore_eos": True,
                "spec": "off"}
        status, text = request(f"http://{lb}/v1/completions", body, {"X-Conversation-Id": key})
        finish = json.loads(text)["choices"][0]["finish_reason"] if status == 200 else text
        with lock:
            stuck.append((status, finish))

    exited = os.path.join(work, "replica1-exited")
    stop_at = time.time() + 120

    def traffic(worker):
        # Short requests without a key until replica1 has exited and a few more went after.
        after_exit = 0
        while after_exit < 2 and time.time() < stop_at:
            gone = os.path.exists(exited)
            body = {"prompt": "y%d" % worker, "max_tokens": 8, "ignore_eos": True,
                    "stream": worker % 2 == 0}
            try:
                status, text = request(f"http://{lb}/v1/completions", body)
            except Exception as e:  # a timeout: counted as lost
                status, text = repr(e), ""
            ok = status == 200 and (not body["stream"] or "data: [DONE]" in text)
            with lock:
                results.append((status, ok))
            after_exit += gone
            time.sleep(0.25)

    threads = [threading.Thread(target=long_stream)]
    threads += [threading.Thread(target=traffic, args=(w,)) for w in range(2)]
    for t in threads:
        t.start()
    # Once the stream flows, two more requests of its conversation: replica1 (2 slots) runs one
    # and queues the other. Then it gets SIGTERM (from the runner) and must say "draining".
    assert streaming.wait(60), "the stream to replica1 did not flow"
    for _ in range(2):
        threads.append(threading.Thread(target=stuck_request))
        threads[-1].start()
    deadline = time.time() + 60
    while time.time() < deadline:
        status, text = request(f"http://{r1}/health", timeout=5)
        load = json.loads(text)
        if load["slots_busy"] == 2 and load["queue_depth"] >= 1:
            break
        time.sleep(0.01)
    assert load["slots_busy"] == 2 and load["queue_depth"] >= 1, load
    open(os.path.join(work, "drain-streaming"), "w").close()
    deadline = time.time() + 60
    draining = None
    while time.time() < deadline and draining is None:
        status, text = request(f"http://{r1}/health", timeout=5)
        if status == 503 and json.loads(text)["status"] == "draining":
            draining = json.loads(text)
        assert status != 0, "replica1 stopped listening before its stream ended"
        time.sleep(0.02)
    assert draining, "replica1's /health never said draining"
    print("ok   replica1 after SIGTERM: /health 503 %s" % json.dumps(draining))
    req = urllib.request.Request(f"http://{r1}/v1/completions",
                                 json.dumps({"prompt": "w", "max_tokens": 1}).encode(),
                                 {"Content-Type": "application/json"})
    try:
        http.open(req, timeout=30)
        raise AssertionError("draining replica1 took a new request")
    except urllib.error.HTTPError as e:
        assert e.code == 503 and e.headers["Retry-After"], (e.code, dict(e.headers))
        print("ok   a new request sent to it directly: 503, Retry-After %s, %s"
              % (e.headers["Retry-After"], json.loads(e.read())["error"]["code"]))
    # A request of the conversation stuck to the draining replica: served by the other one.
    state = server_states()["replica1"]
    got = where(lambda: chat({"X-Conversation-Id": key}), 1, ["replica2"])
    assert got["replica2"] == 1, got
    print("ok   a request stuck to draining replica1 (haproxy saw it %s) was served by replica2"
          % state)
    for t in threads:
        t.join()
    assert long_run["status"] == 200 and long_run["done"] and long_run["finish"] == "length", \
        long_run
    print("ok   the stream running on replica1 finished: %d chunks, [DONE], finish_reason length"
          % long_run["chunks"])
    assert len(stuck) == 2 and all(r == (200, "length") for r in stuck), stuck
    print("ok   the requests running and queued on replica1 at SIGTERM finished: %s" % stuck)
    bad = [r for r in results if not r[1]]
    print("     %d short requests through haproxy during the drain, %d failed"
          % (len(results), len(bad)))
    assert not bad and len(results) >= 6, results
    print("ok   no request accepted by haproxy was lost")
    got = where(lambda: chat({"X-Conversation-Id": key}), 3, ["replica2"])
    assert got["replica2"] == 3, got
    print("ok   after replica1 exited, its conversation goes to replica2")


{"wait_up": wait_up, "spread": spread, "sticky": sticky, "drain": drain}[sys.argv[1]]()
PY
drive() { python3 "$client" "$1" "127.0.0.1:$lb_port" "127.0.0.1:$port1" "127.0.0.1:$port2" \
  "127.0.0.1:$stats_port" "$work"; }

drive wait_up || fail "haproxy did not start"
drive spread || fail "requests without a key did not spread"
drive sticky || fail "a conversation did not stay on its replica"

# The drain: the driver streams through haproxy to replica1 and sends traffic; once the stream
# flows, replica1 gets SIGTERM here and must exit 0 (serve_stop) while the driver checks.
drive drain > "$work/drain.out" 2>&1 &
driver=$!
pids+=("$driver")
for _ in $(seq 1 600); do
  [[ -f $work/drain-streaming ]] && break
  kill -0 "$driver" 2> /dev/null || { cat "$work/drain.out"; fail "the drain driver ended early"; }
  sleep 0.1
done
[[ -f $work/drain-streaming ]] || { cat "$work/drain.out"; fail "the stream to replica1 never flowed"; }
serve_pid=$pid1
serve_stop "$log1"
touch "$work/replica1-exited"
status=0
wait "$driver" || status=$?
cat "$work/drain.out"
[[ $status == 0 ]] || fail "the drain went wrong"
served=$(grep -c 'POST /v1/completions 200' "$log1" || true)
refused=$(grep -c ' 503 .*shutting down' "$log1" || true)
# httplog's "actconn/feconn/beconn/srv_conn/retries" after the termination state ("+": redispatched)
retried=$(grep -Ec ' [-A-Za-z]{4} [0-9]+/[0-9]+/[0-9]+/[0-9]+/\+?[1-9][0-9]* ' "$lb_log" || true)
echo "     replica1 served $served completions in all, refused $refused while draining;" \
  "haproxy retried $retried request(s)"

serve_pid=$pid2
serve_stop "$log2"
kill "$lb_pid" 2> /dev/null || true
wait "$lb_pid" 2> /dev/null || true
echo "ok   HAProxy with two strata replicas: spread, sticky, drained without losing a request"
