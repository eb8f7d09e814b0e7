#!/usr/bin/env bash
# End-to-end: a real `strata serve` process on a generated chat model, driven by the official
# OpenAI client library (openai_e2e.mjs), then stopped with SIGTERM (must exit 0).
#   run_openai_e2e.sh STRATA MAKE_SYNTHETIC_MODEL VOCAB_GGUF NODE_PREFIX WORK_DIR [DEVICE [PLACEMENT]]
# DEVICE (e.g. vk0): serve with --device DEVICE and check the log says the model runs there.
# PLACEMENT (e.g. "--n-cpu-moe 1"): placement flags; the log must show experts in RAM.
set -euo pipefail
strata=$1 make_model=$2 vocab=$3 node_prefix=$4 work=$5 device=${6:-} placement=${7:-}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/server/serve_helpers.sh
source "$here/serve_helpers.sh"
model=$(e2e_model "$make_model" "$vocab" "$work")
log=$work/serve${device:+-$device}${placement:+-hybrid}.log
n_ctx=512
default_max_tokens=5  # --max-tokens: what a request without max_tokens gets
device_args=()
[[ -n $device ]] && device_args=(--device "$device")
read -ra placement_args <<< "$placement"
STRATA_API_KEY=e2e-key serve_start "$log" "$strata" -m "$model" --ctx $n_ctx --parallel 2 \
  --max-tokens $default_max_tokens --alias strata-test --alias strata-coder -t 2 \
  "${device_args[@]}" "${placement_args[@]}"
url=$serve_url
if [[ -n $device ]] && ! grep -q "on $device (" "$log"; then
  cat "$log"; echo "the model is not running on $device" >&2; exit 1
fi
if [[ -n $placement ]] && ! grep -q "in RAM computed by the CPU" "$log"; then
  cat "$log"; echo "no experts in RAM with $placement" >&2; exit 1
fi
node "$here/openai_e2e.mjs" "$node_prefix" "$url" e2e-key $n_ctx $default_max_tokens ${device:+"$device"}
# One log line per request: completions with their token counts, errors with their message.
for line in 'Z POST /v1/chat/completions 200 [0-9.]+ s prompt [0-9]+ \(cached [0-9]+\) generated [0-9]+ at' \
    "Z POST /v1/chat/completions 400 [0-9.]+ s: 'temperature' must be" 'Z GET /v1/models 401 '; do
  grep -Eq "$line" "$log" || { cat "$log"; echo "no request log line like: $line" >&2; exit 1; }
done
if [[ -n $placement ]]; then  # /props and /metrics show the plan in force and device memory
  base=${url%/v1}
  props=$(curl -sf -H "Authorization: Bearer e2e-key" "$base/props")
  grep -q "in RAM computed by the CPU" <<< "$props" || { echo "/props: $props" >&2; exit 1; }
  grep -q '"allocated_bytes"' <<< "$props" || { echo "/props: $props" >&2; exit 1; }
  metrics=$(curl -sf -H "Authorization: Bearer e2e-key" "$base/metrics")
  grep -q "^strata_device_memory_bytes{device=\"$device " <<< "$metrics" ||
    { echo "/metrics: $metrics" >&2; exit 1; }
  # The RAM experts sit in host-visible memory the GPU copies from (a positive gauge).
  grep -q '"pinned_host_bytes":[1-9]' <<< "$props" || { echo "/props: $props" >&2; exit 1; }
  grep -q "^strata_pinned_host_bytes{device=\"$device .*} [1-9]" <<< "$metrics" ||
    { echo "/metrics: $metrics" >&2; exit 1; }
fi
serve_stop "$log"
