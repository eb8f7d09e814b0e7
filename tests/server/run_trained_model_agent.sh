#!/usr/bin/env bash
# A real agent with the trained model, nothing scripted: Qwen Code (qwen_code_trained_e2e.mjs)
# asks `strata serve` running tools/train/strata-coder-tiny.gguf what a file does; the model calls
# read_file, Qwen Code runs it, the model answers and ends its turn. The server is then stopped
# with SIGTERM (must exit 0).
#   run_trained_model_agent.sh STRATA MODEL NODE_PREFIX WORK_DIR
set -euo pipefail
strata=$1 model=$2 node_prefix=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/server/serve_helpers.sh
source "$here/serve_helpers.sh"
mkdir -p "$work"
log=$work/serve-trained-agent.log
# No repetition penalty: the file recommends 1.2 (its free text loops without), but a path is
# copied from the prompt's last tokens, which the penalty pushes away from.
serve_start "$log" "$strata" -m "$model" --ctx 2048 --parallel 1 --alias strata-coder-tiny -t 2 \
  --repeat-penalty 1

node "$here/qwen_code_trained_e2e.mjs" "$node_prefix" "$serve_url" strata-coder-tiny "$work" ||
  { cat "$log"; echo "Qwen Code with the trained model failed" >&2; exit 1; }
if grep -Eq 'Z [A-Z]+ [^ ]+ [45][0-9][0-9] ' "$log"; then
  cat "$log"; echo "Qwen Code got an error status from strata serve" >&2; exit 1
fi
serve_stop "$log"
