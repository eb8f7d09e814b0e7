#!/usr/bin/python3
"""Speculative decoding, measured side by side: every request of a task set is sent twice to one
`strata serve` (greedy, --parallel 1), once with "spec": "off" and once with "spec": "auto", in
alternation so both see the same machine; the server's own decode timing (its JSON request log)
gives tok/s. Checks that both answers are identical and prints, per kind of task, decode speed
with and without speculation, their ratio, and how many drafted tokens were checked and kept.

    bench/speculation.py --model tools/train/strata-coder-tiny.gguf \\
        --tasks build/train/held_out_tasks.json [--limit 20] [--json out.json]

The tasks are tools/train's held-out set (train.py writes it): "rename" answers copy the code
they were given with one identifier changed (an edit: what prompt-lookup drafts live on); "write"
answers and "read" answers (after the tool result) are new text.
"""

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--tasks", required=True, help="held_out_tasks.json from tools/train/train.py")
    p.add_argument("--strata", default=os.path.join(ROOT, "build/release/bin/strata"))
    p.add_argument("--threads", type=int, default=0, help="0: strata's default")
    p.add_argument("--port", type=int, default=18641)
    p.add_argument("--limit", type=int, default=20, help="tasks of each kind")
    p.add_argument("--max-tokens", type=int, default=600)
    p.add_argument("--json", help="write the table here as JSON too")
    return p.parse_args()


class Server:
    def __init__(self, args):
        cmd = [args.strata, "serve", "-m", args.model, "--port", str(args.port), "--ctx", "4096",
               "--parallel", "1", "--log-format", "json"]
        if args.threads:
            cmd += ["-t", str(args.threads)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        self.url = "http://127.0.0.1:%d" % args.port
        for _ in range(600):
            try:
                urllib.request.urlopen(self.url + "/health", timeout=1)
                return
            except OSError:
                if self.proc.poll() is not None:
                    sys.exit("strata serve exited: " + self.proc.stderr.read()[-2000:])
                time.sleep(0.1)
        sys.exit("strata serve did not come up")

    def chat(self, messages, tools, spec, max_tokens):
        body = {"messages": messages, "temperature": 0, "max_tokens": max_tokens, "spec": spec}
        if tools:
            body["tools"] = tools
        req = urllib.request.Request(self.url + "/v1/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            answer = json.load(r)
        # The request's log line (one request at a time: the next JSON line on stderr).
        while True:
            line = self.proc.stderr.readline()
            if not line:
                sys.exit("strata serve stopped")
            if line.startswith("{") and '"/v1/chat/completions"' in line:
                return answer, json.loads(line)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def requests_of(task):
    """(kind, messages, tools) of the turns the model writes new text or copies in."""
    if task["kind"] == "read":  # the answer after the file came back
        return [("read answer", task["turns"][1][0], task["tools"])]
    return [(task["kind"], task["turns"][0][0], None)]


def main():
    args = parse_args()
    tasks = json.load(open(args.tasks))["tasks"]
    chosen, per_kind = [], {}
    for t in tasks:
        if per_kind.get(t["kind"], 0) < args.limit:
            per_kind[t["kind"]] = per_kind.get(t["kind"], 0) + 1
            chosen += requests_of(t)
    server = Server(args)
    rows = {}
    mismatches = 0
    try:
        for i, (kind, messages, tools) in enumerate(chosen):
            got = {}
            for spec in ("off", "auto"):
                answer, log = server.chat(messages, tools, spec, args.max_tokens)
                got[spec] = (answer["choices"][0]["message"], log)
            if got["off"][0] != got["auto"][0]:
                mismatches += 1
                print("\nDIFFERENT ANSWERS (%s #%d)" % (kind, i), file=sys.stderr)
            r = rows.setdefault(kind, {"requests": 0, "tokens": 0, "seconds_off": 0.0,
                                       "seconds_auto": 0.0, "drafted": 0, "accepted": 0})
            off, auto = got["off"][1], got["auto"][1]
            r["requests"] += 1
            r["tokens"] += off["generated_tokens"]
            for name, log in (("off", off), ("auto", auto)):
                rate = log["tokens_per_second"]
                r["seconds_" + name] += log["generated_tokens"] / rate if rate > 0 else 0.0
            r["drafted"] += auto.get("drafted_tokens", 0)
            r["accepted"] += auto.get("accepted_tokens", 0)
            print("\r%d/%d requests" % (i + 1, len(chosen)), end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
    finally:
        server.stop()

    print("| task | requests | tokens | tok/s off | tok/s auto | auto/off | drafted | kept |")
    print("|---|---|---|---|---|---|---|---|")
    table = []
    for kind, r in rows.items():
        off = r["tokens"] / r["seconds_off"] if r["seconds_off"] else 0.0
        auto = r["tokens"] / r["seconds_auto"] if r["seconds_auto"] else 0.0
        kept = r["accepted"] / r["drafted"] if r["drafted"] else 0.0
        print("| %s | %d | %d | %.1f | %.1f | %.2fx | %d | %.0f%% |" % (
            kind, r["requests"], r["tokens"], off, auto, auto / off if off else 0.0, r["drafted"],
            100 * kept))
        table.append(dict(r, kind=kind, tok_s_off=off, tok_s_auto=auto))
    print("identical answers: %d of %d" % (len(chosen) - mismatches, len(chosen)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": table, "mismatches": mismatches}, f, indent=1)
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
