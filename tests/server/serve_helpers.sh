# shellcheck shell=bash
# Sourced by the server end-to-end runners (bash, set -euo pipefail): the small test chat model,
# a `strata serve` started in the background on a free port of 127.0.0.1, and its clean stop.

# e2e_model MAKE_SYNTHETIC_MODEL VOCAB_GGUF WORK_DIR: prints the path of a random-weight Qwen3-MoE
# chat model with the real Qwen3 vocabulary and chat template (generated once per WORK_DIR, under
# a temporary name then renamed, since runners running at once share it).
e2e_model() {
  local model=$3/e2e-chat-model.gguf
  mkdir -p "$3"
  if [[ ! -f $model ]]; then
    "$1" --arch qwen3moe --ftype Q8_0 --layers 2 --embd 64 --heads 2 \
      --kv-heads 1 --head-dim 32 --experts 4 --experts-used 2 --expert-ff 64 --vocab 151680 \
      --vocab-from "$2" -o "$model.$$" > /dev/null 2>&1 ||
      { echo "make-synthetic-model failed" >&2; return 1; }
    mv -f "$model.$$" "$model"
  fi
  echo "$model"
}

# serve_start LOG STRATA SERVE_ARGS...: starts `STRATA serve SERVE_ARGS` (stderr to LOG) and waits
# for its URL. Environment for the server goes before the call (VAR=value serve_start ...). The
# server keeps its measurements and run records in a cache beside LOG (STRATA_TEST_CACHE names
# another), never in the user's.
# Sets serve_pid and serve_url (http://127.0.0.1:PORT/v1); the server is killed if the runner exits.
serve_start() {
  local log=$1 strata=$2
  shift 2
  local cache=${STRATA_TEST_CACHE:-${log%/*}/cache}
  XDG_CACHE_HOME=$cache "$strata" serve --host 127.0.0.1 --port 0 "$@" 2> "$log" &
  serve_pid=$!
  trap 'kill "${serve_pid:-}" 2>/dev/null || true' EXIT
  serve_url=""
  for _ in $(seq 1 200); do
    serve_url=$(grep -o 'http://127.0.0.1:[0-9]*/v1' "$log" | head -1 || true)
    [[ -n $serve_url ]] && return 0
    kill -0 "$serve_pid" 2>/dev/null || { cat "$log"; echo "strata serve exited early" >&2; exit 1; }
    sleep 0.1
  done
  cat "$log"; echo "strata serve did not start" >&2; exit 1
}

# serve_stop LOG: SIGTERM to the server started last; it must exit 0.
serve_stop() {
  local status=0
  kill -TERM "$serve_pid"
  wait "$serve_pid" || status=$?
  serve_pid=""
  [[ $status -eq 0 ]] || { cat "$1"; echo "strata serve exited with $status after SIGTERM" >&2; exit 1; }
  echo "strata serve stopped cleanly"
}
