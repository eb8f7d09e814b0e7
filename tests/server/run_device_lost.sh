#!/usr/bin/env bash
# A GPU lost while serving: `strata serve --device vk0` on lavapipe with the device made to look
# lost at its second model step (STRATA_VK_LOSE_DEVICE_AFTER=1). The first request succeeds, the
# one whose step fails and every later one get 503 with code device_lost, /health says 503 and
# why, the rest of the API still answers, and SIGTERM still exits 0.
#   run_device_lost.sh STRATA MAKE_SYNTHETIC_MODEL WORK_DIR [PLACEMENT]
# PLACEMENT (e.g. "--n-cpu-moe 1"): the same with a hybrid plan (the CPU computing experts).
set -euo pipefail
strata=$1 make_model=$2 work=$3 placement=${4:-}
read -ra placement_args <<< "$placement"
mkdir -p "$work"
model=$work/device-lost-model.gguf
# Written under a temporary name and renamed: tests running at once share this file.
if [[ ! -f $model ]]; then
  "$make_model" --byte-vocab --vocab 512 --layers 2 -o "$model.$$" 2>/dev/null
  mv -f "$model.$$" "$model"
fi
icd=$(ls /usr/share/vulkan/icd.d/lvp_icd.*.json | head -1)
log=$work/device-lost${placement:+-hybrid}.log
VK_ICD_FILENAMES=$icd STRATA_VK_LOSE_DEVICE_AFTER=1 "$strata" serve -m "$model" --device vk0 \
  --port 0 --parallel 1 -t 2 "${placement_args[@]}" 2>"$log" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
url=""
for _ in $(seq 1 300); do
  url=$(grep -o 'http://127.0.0.1:[0-9]*' "$log" | head -1 || true)
  [[ -n $url ]] && break
  kill -0 $pid 2>/dev/null || { cat "$log"; echo "strata serve exited early" >&2; exit 1; }
  sleep 0.1
done
[[ -n $url ]] || { cat "$log"; echo "strata serve did not start" >&2; exit 1; }
fail() { cat "$log"; echo "device-lost test: $*" >&2; exit 1; }
complete() {  # prints "STATUS BODY"
  curl -s -o "$work/body.json" -w '%{http_code}' "$url/v1/completions" \
    -H 'Content-Type: application/json' -d '{"prompt": "hello", "max_tokens": 1}'
  echo " $(cat "$work/body.json")"
}
r=$(complete)
[[ $r == 200* ]] || fail "the first request (one step) should succeed, got: $r"
for attempt in lost-during refused-after; do
  r=$(complete)
  [[ $r == 503* ]] || fail "$attempt: expected 503, got: $r"
  [[ $r == *'"code":"device_lost"'* && $r == *'VK_ERROR_DEVICE_LOST'* ]] ||
    fail "$attempt: expected a device_lost error naming VK_ERROR_DEVICE_LOST, got: $r"
done
h=$(curl -s -w ' %{http_code}' "$url/health")
[[ $h == *'"status":"error"'*' 503' && $h == *'GPU was lost'* ]] || fail "/health: $h"
m=$(curl -s -o /dev/null -w '%{http_code}' "$url/v1/models")
[[ $m == 200 ]] || fail "/v1/models after the loss: $m"
kill -TERM $pid
status=0
wait $pid || status=$?
trap - EXIT
[[ $status -eq 0 ]] || fail "strata serve exited with $status after SIGTERM"
echo "device lost: 503s with device_lost, /health 503, server up, clean exit"
