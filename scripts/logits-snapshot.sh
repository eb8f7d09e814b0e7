#!/usr/bin/env bash
# Writes `strata logits` for every oracle model (CPU; and on the first Vulkan device one file per
# architecture, whole and, for MoE models, with the experts of its first layer in RAM) into
# OUTDIR, one .orcl file per run. Two snapshots compared with `cmp` show whether a
# refactor changed any logit bit:
#   scripts/logits-snapshot.sh /tmp/before && (change, build) && scripts/logits-snapshot.sh /tmp/after
#   for f in /tmp/before/*.orcl; do cmp "$f" "/tmp/after/${f##*/}"; done
# Usage: scripts/logits-snapshot.sh OUTDIR [STRATA_BINARY] (default build/release/bin/strata).
set -euo pipefail
out=${1:?usage: logits-snapshot.sh OUTDIR [STRATA_BINARY]}
strata=${2:-build/release/bin/strata}
oracle=${STRATA_ORACLE_DIR:-$(dirname "$0")/../../shared/oracle}
[ -x "$strata" ] || { echo "no strata binary at $strata (build first)" >&2; exit 1; }
[ -d "$oracle" ] || { echo "no oracle folder at $oracle (set STRATA_ORACLE_DIR)" >&2; exit 1; }
mkdir -p "$out"
tokens=1,17,300,42,7,99,256,3,12,480,5,77,123,9,31,64
runs=0
run() {  # NAME MODEL ARGS...
  local name=$1 model=$2
  shift 2
  "$strata" logits -m "$model" -t 2 --tokens "$tokens" -n 6 -o "$out/$name.orcl" "$@" \
    >"$out/$name.log" 2>&1 || { echo "FAILED: $name (see $out/$name.log)" >&2; exit 1; }
  runs=$((runs + 1))
}
for model in "$oracle"/models/*.gguf "$oracle"/archs/models/*.gguf "$oracle"/gdn/models/*.gguf; do
  run "cpu-$(basename "$model" .gguf)" "$model" --device none
done
if [ "${STRATA_SNAPSHOT_GPU:-1}" = 1 ] && "$strata" devices 2>/dev/null | grep -q '^vk0'; then
  for model in "$oracle"/models/tiny-{llama,qwen3,qwen3moe}-Q8_0.gguf \
    "$oracle"/archs/models/tiny-{glm4moe,gpt-oss,mixtral,qwen3next}-Q8_0.gguf \
    "$oracle"/gdn/models/tiny-qwen35moe-Q8_0.gguf; do
    name=$(basename "$model" .gguf)
    run "gpu-$name" "$model" --device vk0
    case $name in
      *llama* | tiny-qwen3-*) ;;
      *) run "gpu-ram-experts-$name" "$model" --device vk0 --n-cpu-moe 1 ;;
    esac
  done
fi
echo "$runs runs written to $out"
