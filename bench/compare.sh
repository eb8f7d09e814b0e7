#!/usr/bin/env bash
# Side-by-side benchmark: strata and any peer engines found on this machine, on the same GGUF
# file with the same thread count, in one run. Prints a table of pp/tg tok/s and ratios to strata.
#
#   bench/compare.sh MODEL.gguf [THREADS] [N_PROMPT] [N_GEN] [REPS]
#
# Peers are found through $LLAMA_BENCH and $IK_LLAMA_BENCH (paths to their llama-bench), or
# `llama-bench` on PATH. They are built from their public sources outside this repository.
set -euo pipefail
model=${1:?usage: bench/compare.sh MODEL.gguf [THREADS] [N_PROMPT] [N_GEN] [REPS]}
threads=${2:-$(nproc)}
n_prompt=${3:-512}
n_gen=${4:-128}
reps=${5:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
strata=${STRATA:-$root/build/release/bin/strata}
[[ -x $strata ]] || { echo "build strata first (cmake --build --preset release)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "compare.sh needs python3 to read JSON" >&2; exit 1; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "model $model, $threads threads, pp$n_prompt, tg$n_gen, $reps repetitions" >&2

"$strata" bench -m "$model" -t "$threads" -p "$n_prompt" -n "$n_gen" -r "$reps" --json \
  > "$out/strata.json" 2> "$out/strata.log"

declare -A peers=()
[[ -n ${LLAMA_BENCH:-} ]] && peers[llama.cpp]=$LLAMA_BENCH
[[ -n ${IK_LLAMA_BENCH:-} ]] && peers[ik_llama.cpp]=$IK_LLAMA_BENCH
if [[ ${#peers[@]} -eq 0 ]] && command -v llama-bench >/dev/null; then
  peers[llama-bench]=$(command -v llama-bench)
fi
for name in "${!peers[@]}"; do
  echo "running $name" >&2
  if ! "${peers[$name]}" -m "$model" -t "$threads" -p "$n_prompt" -n "$n_gen" -r "$reps" -o json \
      > "$out/peer-$name.json" 2> "$out/peer-$name.log"; then
    echo "$name failed; see its log:" >&2
    tail -5 "$out/peer-$name.log" >&2
    rm -f "$out/peer-$name.json"
  fi
done

python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
s = json.load(open(os.path.join(out, "strata.json")))
rows = [("strata", s["pp"]["tok_per_s"], s["pp"]["stddev"], s["tg"]["tok_per_s"], s["tg"]["stddev"])]
for f in sorted(os.listdir(out)):
    if not f.startswith("peer-") or not f.endswith(".json"):
        continue
    name = f[5:-5]
    pp = tg = (0.0, 0.0)
    for r in json.load(open(os.path.join(out, f))):
        if r.get("n_prompt", 0) > 0 and r.get("n_gen", 0) == 0:
            pp = (r["avg_ts"], r["stddev_ts"])
        if r.get("n_gen", 0) > 0 and r.get("n_prompt", 0) == 0:
            tg = (r["avg_ts"], r["stddev_ts"])
    rows.append((name, pp[0], pp[1], tg[0], tg[1]))
print(f"| engine | pp{s['pp']['tokens']} tok/s | tg{s['tg']['tokens']} tok/s | strata pp ratio | strata tg ratio |")
print("|---|---:|---:|---:|---:|")
for name, pp, pps, tg, tgs in rows:
    rp = f"{rows[0][1] / pp:.2f}x" if pp > 0 and name != "strata" else "-"
    rt = f"{rows[0][3] / tg:.2f}x" if tg > 0 and name != "strata" else "-"
    print(f"| {name} | {pp:.2f} ± {pps:.2f} | {tg:.2f} ± {tgs:.2f} | {rp} | {rt} |")
print(f"\nstrata: {s['bytes_per_token'] / 2**20:.1f} MiB read per generated token, RAM {s['ram_read_gbps']:.1f} GB/s, "
      f"roofline {100 * s['roofline_fraction']:.1f}%")
PY
