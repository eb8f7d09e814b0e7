#!/usr/bin/env bash
# End-to-end: real client programs from npm drive `strata serve` on the generated chat model:
# the Vercel AI SDK (ai_sdk_e2e.mjs) and the Qwen Code CLI (qwen_code_e2e.mjs). A random-weight
# model never writes a tool call, so each client gets a server of its own whose
# STRATA_TEST_SCRIPTED_OUTPUT file (printed by the client's `--script`) holds the answers to the
# requests that client makes, in order. Each server is then stopped with SIGTERM (must exit 0).
#   run_clients_e2e.sh STRATA MAKE_SYNTHETIC_MODEL VOCAB_GGUF NODE_PREFIX WORK_DIR
set -euo pipefail
strata=$1 make_model=$2 vocab=$3 node_prefix=$4 work=$5
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/server/serve_helpers.sh
source "$here/serve_helpers.sh"
model=$(e2e_model "$make_model" "$vocab" "$work")
n_ctx=32768  # Qwen Code's first request is ~17k tokens (system prompt and tool schemas)
for client in ai_sdk qwen_code; do
  script=$work/$client-script.json log=$work/serve-$client.log
  node "$here/${client}_e2e.mjs" --script "$work" > "$script"
  STRATA_TEST_SCRIPTED_OUTPUT=$script STRATA_API_KEY=e2e-key serve_start "$log" "$strata" \
    -m "$model" --ctx $n_ctx --parallel 1 --alias strata-test -t 2
  node "$here/${client}_e2e.mjs" "$node_prefix" "$serve_url" e2e-key strata-test "$work" ||
    { cat "$log"; echo "$client failed against strata serve" >&2; exit 1; }
  # Every request the client made was answered (no 4xx/5xx, even one it retried or ignored).
  if grep -Eq 'Z [A-Z]+ [^ ]+ [45][0-9][0-9] ' "$log"; then
    cat "$log"; echo "$client got an error status from strata serve" >&2; exit 1
  fi
  serve_stop "$log"
done
