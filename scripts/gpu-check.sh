#!/usr/bin/env bash
# The GPU check on a real GPU, in one command, sized for a ~10 minute slot: builds strata (or
# uses a build given in STRATA_BUILD), runs the GPU op tests and the whole-model oracle tests on
# the GPU, benchmarks Qwen3-30B-A3B-shaped synthetic models on it, and prints one table.
#
#   scripts/gpu-check.sh [DEVICE]        DEVICE: vkN (default: the first non-CPU device)
#   scripts/gpu-check.sh --pack DIR      puts this machine's build, the shared libraries it needs
#                                        and an oracle subset (~55 MB) into DIR, for a GPU
#                                        machine without the build dependencies: there, run
#                                        STRATA_BUILD=DIR scripts/gpu-check.sh
#
# Environment:
#   STRATA_BUILD=DIR     a build made elsewhere (DIR/bin/strata, DIR/tests/test_vulkan, ...);
#                        skips the build (a GPU machine without the build dependencies)
#   STRATA_ORACLE_DIR    the oracle files (default ../shared/oracle beside the checkout)
#   GPU_CHECK_LAYERS     layers of the benchmark models (default 8: ~2.3 GB at Q4_K_M)
#   GPU_CHECK_OUT=DIR    where logs and the table go (default build/gpu-check)
#   GPU_CHECK_MODELS=DIR where the generated benchmark models go (default GPU_CHECK_OUT)
#   GPU_CHECK_MODEL_ARGS / GPU_CHECK_BENCH_ARGS  other generator / bench arguments (a quick dry
#                        run on lavapipe: "--layers 1 --embd 256" and "-p 16 -n 4 -r 1")
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

# --pack DIR: binaries + libraries + oracle subset for a machine that cannot build strata.
if [[ ${1:-} == --pack ]]; then
  pack=${2:?usage: scripts/gpu-check.sh --pack DIR}
  build=${STRATA_BUILD:-$root/build/release}
  oracle=${STRATA_ORACLE_DIR:-$root/../shared/oracle}
  rm -rf "$pack" && mkdir -p "$pack"/{bin,tests,lib} "$pack"/oracle/{models,logits,gdn/models,gdn/logits}
  for f in bin/strata bin/make-synthetic-model tests/test_vulkan tests/test_model_oracle; do
    strip -o "$pack/$f" "$build/$f" || exit 1
  done
  # Every shared library but the C/C++ runtime, zlib and OpenSSL (in every Debian or Ubuntu
  # image) and the Vulkan loader (the GPU machine's own).
  ldd "$pack"/bin/* "$pack"/tests/* | awk '$3 ~ /^\// {print $3}' | sort -u |
    grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*|libvulkan|libssl|libcrypto|libz)\.so' |
    xargs -r cp -L -t "$pack/lib"
  # The oracle models of every architecture and the common weight types (F16 for greedy runs).
  for m in "$oracle"/models/*-{F16,Q4_K_M,Q8_0,IQ4_XS}.gguf; do
    [[ -f $m ]] || continue
    cp "$m" "$pack/oracle/models/"
    stem=$(basename "$m" .gguf)
    cp "$oracle/logits/$stem".*.orcl "$pack/oracle/logits/" 2>/dev/null
  done
  cp "$oracle"/gdn/models/*.gguf "$pack/oracle/gdn/models/"
  cp "$oracle"/gdn/logits/*.orcl "$pack/oracle/gdn/logits/"
  echo "packed $(du -sh "$pack" | cut -f1) into $pack"
  exit 0
fi

out=${GPU_CHECK_OUT:-$root/build/gpu-check}
mkdir -p "$out"
models=${GPU_CHECK_MODELS:-$out}
mkdir -p "$models"
layers=${GPU_CHECK_LAYERS:-8}
read -ra model_args <<<"${GPU_CHECK_MODEL_ARGS:---preset qwen3-30b-a3b --layers $layers}"
read -ra bench_args <<<"${GPU_CHECK_BENCH_ARGS:--p 512 -n 128 -r 3}"
export STRATA_ORACLE_DIR=${STRATA_ORACLE_DIR:-$root/../shared/oracle}

oracle_filter='*Gpu*:*MultiSequence*'
if [[ -n ${STRATA_BUILD:-} ]]; then
  build=$(cd "$STRATA_BUILD" && pwd)
  [[ -d $build/lib ]] && export LD_LIBRARY_PATH=$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if [[ -d $build/oracle ]]; then  # a packed subset: not every reference file is there
    export STRATA_ORACLE_DIR=$build/oracle
    oracle_filter+=':-*AllReferenceFilesFound*'
  fi
else
  build=$root/build/release
  echo "== building (release preset)"
  cmake --preset release >"$out/build.log" 2>&1 && cmake --build --preset release >>"$out/build.log" 2>&1 ||
    { tail -30 "$out/build.log"; echo "gpu-check: the build failed (log: $out/build.log)" >&2; exit 1; }
fi
strata=$build/bin/strata
[[ -x $strata ]] || { echo "gpu-check: no strata binary at $strata" >&2; exit 1; }

echo "== devices"
"$strata" devices | tee "$out/devices.txt"
device=${1:-}
if [[ -z $device ]]; then
  device=$("$strata" devices --json | python3 -c '
import json, sys
ds = [d for d in json.load(sys.stdin) if d["usable"] and not d["is_cpu"]]
print(ds[0]["id"] if ds else "")')
fi
[[ -n $device ]] || { echo "gpu-check: no usable GPU (name a device to use a CPU one)" >&2; exit 1; }
name=$("$strata" devices --json | python3 -c "
import json, sys
print(next(d['name'] for d in json.load(sys.stdin) if d['id'] == '$device'))")
echo "== checking on $device ($name)"

rows=()
row() { rows+=("$(printf '| %-44s | %-10s | %s |' "$1" "$2" "$3")"); }

# gtest binaries: pass / fail counts from their summary lines.
run_gtest() {
  local label=$1 log=$2
  shift 2
  local start=$SECONDS
  STRATA_TEST_DEVICE=$device "$@" >"$log" 2>&1
  local rc=$? passed failed
  passed=$(grep -oP '^\[  PASSED  \] \K[0-9]+' "$log" | tail -1)
  failed=$(grep -oP '^\[  FAILED  \] \K[0-9]+(?= tests?, listed below)' "$log" | tail -1)
  row "$label" "$([[ $rc -eq 0 ]] && echo pass || echo FAIL)" \
    "${passed:-0} passed, ${failed:-0} failed, $((SECONDS - start)) s (log: $(basename "$log"))"
}
echo "== op tests (every kernel x weight type against the CPU)"
run_gtest "op tests (test_vulkan)" "$out/op-tests.log" "$build/tests/test_vulkan"
echo "== whole models against the oracle on the GPU"
run_gtest "oracle logits, greedy, batches (GPU)" "$out/oracle.log" "$build/tests/test_model_oracle" \
  --gtest_filter="$oracle_filter"
grep -E '^tiny-.*vs cpu' "$out/oracle.log" >"$out/oracle-rows.txt" || true

echo "== benchmarks (${model_args[*]})"
for ftype in Q4_K_M Q8_0; do
  model=$models/bench-model-$(echo "${model_args[*]}" | tr -c 'a-zA-Z0-9.\n-' _)-$ftype.gguf
  if [[ ! -f $model ]]; then
    "$build/bin/make-synthetic-model" "${model_args[@]}" --ftype "$ftype" \
      -o "$model" >"$out/make-$ftype.log" 2>&1 || { row "bench $ftype" FAIL "model generation failed"; continue; }
  fi
  json=$out/bench-$ftype.json
  if "$strata" bench -m "$model" --device "$device" "${bench_args[@]}" --json >"$json" \
    2>"$out/bench-$ftype.log"; then
    row "bench $ftype ($(du -h "$model" | cut -f1))" ok "$(python3 -c "
import json
j = json.load(open('$json'))
print('pp%d %.1f tok/s, tg%d %.1f tok/s, %.0f%% of %.0f GB/s read (upload %.1f GB/s)' % (
    j['pp']['tokens'], j['pp']['tok_per_s'], j['tg']['tokens'], j['tg']['tok_per_s'],
    100 * j['roofline_fraction'], j['gpu_read_gbps'], j['gpu_upload_gbps']))")"
  else
    row "bench $ftype" FAIL "$(tail -1 "$out/bench-$ftype.log")"
  fi
done

# Hybrid plans: the Q4_K_M model with half of it allowed on the GPU (GPU_CHECK_HYBRID_BUDGET),
# the planner's split against llama.cpp's --n-cpu-moe for the same budget, with the step's overlap.
hybrid_model=$models/bench-model-$(echo "${model_args[*]}" | tr -c 'a-zA-Z0-9.\n-' _)-Q4_K_M.gguf
if [[ -f $hybrid_model ]]; then
  budget=${GPU_CHECK_HYBRID_BUDGET:-$(($(stat -c %s "$hybrid_model") / 2))}
  echo "== hybrid plans (--vram-budget $budget)"
  # The third run keeps the prompt batches' RAM experts on the CPU (STRATA_PROMPT_EXPERTS=cpu):
  # against the first, it shows whether the cost model's choice to upload them paid.
  for placement in "" "--n-cpu-moe $((layers / 2))" "prompt-experts-on-cpu"; do
    prompt_mode=auto
    [[ $placement == prompt-experts-on-cpu ]] && prompt_mode=cpu placement=""
    read -ra placement_args <<<"$placement"
    tag=hybrid${placement:+-n-cpu-moe}-$prompt_mode
    json=$out/bench-$tag.json
    if STRATA_PROMPT_EXPERTS=$prompt_mode "$strata" bench -m "$hybrid_model" --device "$device" \
      --vram-budget "$budget" "${placement_args[@]}" "${bench_args[@]}" --profile --json \
      >"$json" 2>"$out/bench-$tag.log"; then
      row "bench Q4_K_M ${placement:-planner's plan}, prompt experts $prompt_mode" ok "$(python3 -c "
import json
j = json.load(open('$json'))
t = j.get('hybrid_timeline', {'layers': [], 'overlapped_layers': 0})
p = j.get('hybrid_prompt_timeline', {'layers': [], 'uploads': []})
print('pp%d %.1f tok/s, tg%d %.1f tok/s; decode: %d layers hand experts to the CPU, GPU busy at CPU start in %d; prompt: %d layers uploaded, %d on the CPU' % (
    j['pp']['tokens'], j['pp']['tok_per_s'], j['tg']['tokens'], j['tg']['tok_per_s'],
    len(t['layers']), t['overlapped_layers'], len(p['uploads']), len(p['layers'])))")"
    else
      row "bench Q4_K_M ${placement:-planner's plan}, prompt experts $prompt_mode" FAIL \
        "$(tail -1 "$out/bench-$tag.log")"
    fi
  done
  # The planner's prediction for the plan the first run executed (same GPU, same budget).
  if "$strata" plan -m "$hybrid_model" --device "$device" --vram-budget "$budget" --ctx 1024 \
    --json >"$out/plan-hybrid.json" 2>"$out/plan-hybrid.log" && [[ -s $out/bench-hybrid-auto.json ]]; then
    row "plan vs bench, planner's plan" ok "$(python3 -c "
import json
p = json.load(open('$out/plan-hybrid.json'))['predicted']
b = json.load(open('$out/bench-hybrid-auto.json'))
tg = b['tg']['tok_per_s']
print('tg predicted %.1f tok/s overlapped (%.1f taking turns), measured %.1f (%+.0f%%); pp predicted %.0f, measured %.0f' % (
    p['decode_tok_s_overlapped'], p['decode_tok_s'], tg, 100 * (p['decode_tok_s_overlapped'] / tg - 1),
    p['prompt_tok_s'], b['pp']['tok_per_s']))")"
  else
    row "plan vs bench, planner's plan" FAIL "$(tail -1 "$out/plan-hybrid.log")"
  fi
fi

{
  echo
  echo "strata GPU check on $device ($name), commit $(git rev-parse --short HEAD 2>/dev/null || echo ?), $(date -u +%F)"
  echo
  printf '| %-44s | %-10s | %s |\n' check result detail
  printf '|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..46})" "$(printf -- '-%.0s' {1..12})" "---"
  printf '%s\n' "${rows[@]}"
  if [[ -s $out/oracle-rows.txt ]]; then
    echo
    echo "oracle models on the GPU (NMSE against the reference engine and against strata's CPU):"
    sed 's/^/    /' "$out/oracle-rows.txt"
  fi
} | tee "$out/table.md"
! grep -q '| FAIL ' "$out/table.md"
