#!/usr/bin/env bash
# Predicted (`strata plan`, CPU only) vs measured (`strata bench`) speed on this machine.
#
#   bench/plan_vs_bench.sh MODEL.gguf... [THREADS...]
#
# Arguments ending in .gguf are models, plain numbers thread counts (default: 1 2). Every row
# calibrates again (--remeasure, a few seconds) right before its benchmark, so the calibration
# and the measurement are taken close together on a machine whose load changes; each row runs
#   strata plan  --json --gpu none -t T --ctx 640
#   strata bench --json -p 512 -n 128 -r 2 -t T --no-bandwidth
# and one Markdown table row is printed: predicted and measured tg/pp and the error
# (predicted / measured - 1). STRATA (default build/release/bin/strata) picks the binary;
# REMEASURE=0 reuses a cached calibration.
set -euo pipefail

STRATA=${STRATA:-build/release/bin/strata}
REMEASURE=${REMEASURE:-1}
models=()
threads=()
for arg in "$@"; do
  if [[ $arg =~ ^[0-9]+$ ]]; then threads+=("$arg"); else models+=("$arg"); fi
done
if [[ ${#models[@]} -eq 0 ]]; then
  echo "usage: $0 MODEL.gguf... [THREADS...]" >&2
  exit 2
fi
[[ ${#threads[@]} -gt 0 ]] || threads=(1 2)
command -v jq >/dev/null || { echo "$0: needs jq" >&2; exit 2; }

echo "| model | threads | predicted tg | measured tg | error | predicted pp | measured pp | error |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for t in "${threads[@]}"; do
  for m in "${models[@]}"; do
    extra=()
    if [[ $REMEASURE == 1 ]]; then extra=(--remeasure); fi
    plan=$("$STRATA" plan -m "$m" --json --gpu none -t "$t" --ctx 640 "${extra[@]}" 2>/dev/null)
    bench=$("$STRATA" bench -m "$m" --json -p 512 -n 128 -r 2 -t "$t" --no-bandwidth 2>/dev/null)
    ptg=$(jq '.predicted.decode_tok_s' <<<"$plan")
    ppp=$(jq '.predicted.prompt_tok_s' <<<"$plan")
    mtg=$(jq '.tg.tok_per_s' <<<"$bench")
    mpp=$(jq '.pp.tok_per_s' <<<"$bench")
    awk -v m="$(basename "$m" .gguf)" -v t="$t" -v ptg="$ptg" -v mtg="$mtg" -v ppp="$ppp" \
      -v mpp="$mpp" 'BEGIN {
        printf "| %s | %d | %.1f | %.1f | %+.1f%% | %.1f | %.1f | %+.1f%% |\n",
          m, t, ptg, mtg, 100 * (ptg / mtg - 1), ppp, mpp, 100 * (ppp / mpp - 1) }'
  done
done
