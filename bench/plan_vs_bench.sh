#!/usr/bin/env bash
# Predicted (`strata plan`, CPU only) vs measured (`strata bench`) speed on this machine.
#
#   bench/plan_vs_bench.sh MODEL.gguf... [THREADS...]
#
# Arguments ending in .gguf are models, plain numbers thread counts (default: 1 2). A row is a
# (model, threads) pair; each round visits every row once and, per row, benchmarks and then
# calibrates again (--remeasure, ~15 s) right after:
#   strata bench --json -p 512 -n 128 -r 2 -t T --no-bandwidth --expert-profile ROUTING
#   strata plan  --json --gpu none -t T --ctx 640 --remeasure --profile ROUTING
# The plan is given the routing of the benchmark's prompt (which experts its tokens chose):
# these synthetic models' untrained routers crowd a prompt's tokens into few experts (in the deeper
# layers ~50 of 128 get any of 512 tokens), which makes prefill cheaper than the uniform routing a
# plan assumes without a profile; the last column is that uniform-routing prediction.
# After ROUNDS rounds (default 3) one Markdown table row per (model, threads) is printed: the
# median predicted and median measured tg and pp, the range of the measured values, and the error:
# the median over rounds of (prediction / measurement - 1), each prediction paired with the
# benchmark taken just before it. Why rounds, pairs and medians: on a shared VM the memory
# bandwidth moves by +-25% for seconds to minutes at a time, so one prediction and one
# measurement taken apart differ by that much whatever the model; pairing them close in time and
# taking the median over rounds spread across the run compares the model with the machine rather
# than two moments of the machine. SAMPLES=FILE keeps the raw rounds (tab-separated).
# STRATA (default build/release/bin/strata) picks the binary; REMEASURE=0 reuses a cached
# calibration. DEVICE=vk0 compares hybrid plans on that GPU instead: bench runs the planner's
# plan there (--device, and --vram-budget VRAM_BUDGET when set: an 8 GB card on a bigger GPU),
# plan probes the same GPU with the same budget, and the predicted tg is the overlapped one
# (strata's executor computes a layer's RAM experts during its GPU experts).
set -euo pipefail

STRATA=${STRATA:-build/release/bin/strata}
REMEASURE=${REMEASURE:-1}
ROUNDS=${ROUNDS:-3}
models=()
threads=()
for arg in "$@"; do
  if [[ $arg =~ ^[0-9]+$ ]]; then threads+=("$arg"); else models+=("$arg"); fi
done
if [[ ${#models[@]} -eq 0 || ! $ROUNDS =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: [ROUNDS=N] $0 MODEL.gguf... [THREADS...]" >&2
  exit 2
fi
[[ ${#threads[@]} -gt 0 ]] || threads=(1 2)
command -v jq >/dev/null || { echo "$0: needs jq" >&2; exit 2; }
for m in "${models[@]}"; do
  [[ -r $m ]] || { echo "$0: cannot read $m" >&2; exit 2; }
done

routing=$(mktemp --suffix .json)
if [[ -n ${SAMPLES:-} ]]; then
  samples=$SAMPLES
  : >"$samples"
  trap 'rm -f "$routing"' EXIT
else
  samples=$(mktemp)
  trap 'rm -f "$samples" "$routing"' EXIT
fi
extra=()
if [[ $REMEASURE == 1 ]]; then extra=(--remeasure); fi
bench_device=(--device none)
plan_device=(--gpu none)
tg_key=.predicted.decode_tok_s
if [[ -n ${DEVICE:-} ]]; then
  bench_device=(--device "$DEVICE" ${VRAM_BUDGET:+--vram-budget "$VRAM_BUDGET"})
  plan_device=(--device "$DEVICE" ${VRAM_BUDGET:+--vram-budget "$VRAM_BUDGET"})
  tg_key=.predicted.decode_tok_s_overlapped
fi
for ((round = 1; round <= ROUNDS; round++)); do
  for t in "${threads[@]}"; do
    for m in "${models[@]}"; do
      echo "round $round/$ROUNDS: $(basename "$m" .gguf), $t threads" >&2
      bench=$("$STRATA" bench -m "$m" --json -p 512 -n 128 -r 2 -t "$t" --no-bandwidth \
        "${bench_device[@]}" --expert-profile "$routing" 2>/dev/null)
      plan=$("$STRATA" plan -m "$m" --json "${plan_device[@]}" -t "$t" --ctx 640 "${extra[@]}" \
        --profile "$routing" 2>/dev/null)
      uniform=$("$STRATA" plan -m "$m" --json "${plan_device[@]}" -t "$t" --ctx 640 2>/dev/null)
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(basename "$m" .gguf)" "$t" \
        "$(jq "$tg_key" <<<"$plan")" "$(jq '.tg.tok_per_s' <<<"$bench")" \
        "$(jq '.predicted.prompt_tok_s' <<<"$plan")" "$(jq '.pp.tok_per_s' <<<"$bench")" \
        "$(jq '.predicted.prompt_tok_s' <<<"$uniform")" >>"$samples"
    done
  done
done

echo "| model | threads | predicted tg | measured tg (range) | error | predicted pp | measured pp (range) | error | pp, uniform routing |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for t in "${threads[@]}"; do
  for m in "${models[@]}"; do
    name=$(basename "$m" .gguf)
    awk -F'\t' -v m="$name" -v t="$t" '
      function median(a, n,   i, j, x) {
        for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
      }
      $1 == m && $2 == t { n++; ptg[n] = $3; mtg[n] = $4; ppp[n] = $5; mpp[n] = $6; upp[n] = $7
        etg[n] = $3 / $4 - 1; epp[n] = $5 / $6 - 1; eupp[n] = $7 / $6 - 1
        if (n == 1 || $4 < tglo) tglo = $4; if (n == 1 || $4 > tghi) tghi = $4
        if (n == 1 || $6 < pplo) pplo = $6; if (n == 1 || $6 > pphi) pphi = $6 }
      END {
        a = median(ptg, n); b = median(mtg, n); c = median(ppp, n); d = median(mpp, n)
        u = median(upp, n)
        printf "| %s | %d | %.1f | %.1f (%.1f-%.1f) | %+.1f%% | %.1f | %.1f (%.1f-%.1f) | %+.1f%% | %.1f (%+.1f%%) |\n",
          m, t, a, b, tglo, tghi, 100 * median(etg, n), c, d, pplo, pphi, 100 * median(epp, n),
          u, 100 * median(eupp, n) }' "$samples"
  done
done
