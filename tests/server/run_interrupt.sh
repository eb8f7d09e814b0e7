#!/usr/bin/env bash
# Ctrl-C during hybrid steps: a model split across two logical devices (--device vk0,vk0) with
# the experts of layer 0 in RAM (--n-cpu-moe 1), so every step has CPU expert work and a hop.
# - `strata serve`: SIGINT while a long generation streams; the stream ends, the server logs
#   that it stopped and exits 0 within its --shutdown-grace (no hang in a step waiting on the
#   GPU or the CPU's experts).
# - `strata run`: SIGINT while it generates; it dies of the signal (status 130), not of a crash,
#   and promptly.
#   run_interrupt.sh STRATA MAKE_SYNTHETIC_MODEL WORK_DIR
set -euo pipefail
set -m  # background jobs keep the default SIGINT action (a script without job control ignores it)
strata=$1 make_model=$2 work=$3
mkdir -p "$work"
model=$work/interrupt-model.gguf
# Written under a temporary name and renamed: tests running at once share this file.
if [[ ! -f $model ]]; then
  "$make_model" --byte-vocab --vocab 512 --layers 2 -o "$model.$$" 2>/dev/null
  mv -f "$model.$$" "$model"
fi
export VK_ICD_FILENAMES
VK_ICD_FILENAMES=$(ls /usr/share/vulkan/icd.d/lvp_icd.*.json | head -1)
placement=(--device vk0,vk0 --n-cpu-moe 1)
log=$work/interrupt-serve.log
fail() { cat "$log" >&2; echo "interrupt test: $*" >&2; exit 1; }
# Waits up to $2 seconds for child $1 to exit; sets status to its exit status (or "running").
wait_for() {
  status=running
  for _ in $(seq 1 $(($2 * 10))); do
    if ! kill -0 "$1" 2>/dev/null; then
      status=0
      wait "$1" || status=$?
      return
    fi
    sleep 0.1
  done
}

# (Its run records go to a cache of the test's own.)
XDG_CACHE_HOME=${log%/*}/cache "$strata" serve -m "$model" "${placement[@]}" --port 0 --parallel 1 \
  -t 2 --shutdown-grace 2 2>"$log" &
pid=$!
trap 'kill -9 $pid 2>/dev/null || true' EXIT
url=""
for _ in $(seq 1 300); do
  url=$(grep -o 'http://127.0.0.1:[0-9]*' "$log" | head -1 || true)
  [[ -n $url ]] && break
  kill -0 $pid 2>/dev/null || fail "strata serve exited early"
  sleep 0.1
done
[[ -n $url ]] || fail "strata serve did not start"
grep -q "on vk0:1 (" "$log" || fail "the plan does not use the second logical device"
stream=$work/interrupt-stream.txt
curl -sN "$url/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt": "hello", "max_tokens": 4000, "ignore_eos": true, "stream": true}' \
  >"$stream" &
client=$!
for _ in $(seq 1 300); do
  [[ $(grep -c '^data:' "$stream" || true) -ge 5 ]] && break
  sleep 0.1
done
[[ $(grep -c '^data:' "$stream" || true) -ge 5 ]] || fail "the generation did not stream"
kill -INT $pid
wait_for $pid 30
trap - EXIT
[[ $status == 0 ]] || fail "strata serve after SIGINT mid-generation: status $status"
grep -q "finishing running requests" "$log" || fail "no shutdown message"
grep -q "stopped" "$log" || fail "did not log that it stopped"
wait_for $client 10
[[ $status != running ]] || fail "the client's stream was left open"
grep -q '^data: \[DONE\]' "$stream" || fail "the stream did not end with [DONE]"
echo "serve: SIGINT during hybrid steps on two devices, stream ended, exit 0"

log=$work/interrupt-run.log
"$strata" run -m "$model" "${placement[@]}" -t 2 --tokens 1,2,3 --ids -n 4000 --ignore-eos \
  >"$work/interrupt-run.out" 2>"$log" &
pid=$!
trap 'kill -9 $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
  [[ $(tr ',' '\n' <"$work/interrupt-run.out" | wc -l) -ge 5 ]] && break
  sleep 0.1
done
[[ $(tr ',' '\n' <"$work/interrupt-run.out" | wc -l) -ge 5 ]] || fail "strata run did not generate"
kill -INT $pid
wait_for $pid 10
trap - EXIT
[[ $status == 130 ]] || fail "strata run after SIGINT mid-generation: status $status (130 expected)"
echo "run: SIGINT during hybrid steps, status 130"
