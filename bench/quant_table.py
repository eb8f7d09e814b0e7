#!/usr/bin/env python3
"""Quality and speed of each quantization of one model, side by side (issue 38's table).

Quantizes BASE (an F16/Q8_0 GGUF) to each type with `strata quantize` (--allow-requantize where
BASE is quantized), then for every file: its size, `strata perplexity` on TEXT with the KL
divergence from BASE (every token kept), and `strata bench` (median of runs). Prints a markdown
table. The BASE row is the reference (KLD 0). With --imatrix FILE, each type is also quantized
with that importance matrix and its KLD shown beside (types without a weighted search: "-").
With --llama-perplexity PATH (llama.cpp's tool, built outside this repository), every file strata
wrote is also scored by llama.cpp with its attention in f32, and its PPL shown beside strata's: the
files load there, and the other engine reads the same values.

    bench/quant_table.py --strata build/release/bin/strata --base tools/train/strata-coder-tiny.gguf \
        --text tests/data/perplexity-text.txt --ctx 128 --out-dir models/quant-table
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

TYPES = ["Q6_K", "Q5_K_M", "Q5_K_S", "Q5_1", "Q5_0", "Q4_K_M", "Q4_K_S", "Q4_1", "IQ4_NL",
         "Q4_0", "IQ4_XS", "Q3_K_L", "Q3_K_M", "Q3_K_S", "Q2_K", "MXFP4_MOE"]


def run(args, what):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{what} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--strata", required=True)
    ap.add_argument("--base", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--ctx", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bench-runs", type=int, default=5)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--types", default=",".join(TYPES))
    ap.add_argument("--imatrix", help="also quantize with this importance matrix")
    ap.add_argument("--llama-perplexity", help="llama.cpp's llama-perplexity: score each file there too")
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    logits = os.path.join(a.out_dir, "base.stkl")
    common = ["-f", a.text, "--ctx", str(a.ctx), "-t", str(a.threads), "--device", "none", "--json"]
    base = json.loads(run([a.strata, "perplexity", "-m", a.base, *common, "--save-logits", logits],
                          "perplexity of the base"))
    rows = [("base", a.base, base, None)]
    weighted = {"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS", "Q4_0", "Q4_1", "Q5_0",
                "Q5_1"}

    def llama_ppl(path):
        if not a.llama_perplexity:
            return None
        # Its log is written by a thread that can lose the last lines at exit: tried up to 3 times.
        for _ in range(3):
            r = subprocess.run([a.llama_perplexity, "-m", path, "-f", a.text, "-c", str(a.ctx),
                                "-b", str(a.ctx), "-t", str(a.threads), "-fa", "off", "-ctk", "f32",
                                "-ctv", "f32"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
            m = re.search(r"Final estimate: PPL = ([0-9.]+)", r.stdout)
            if r.returncode == 0 and m:
                return float(m.group(1))
        sys.exit(f"llama-perplexity failed on {path} ({r.returncode}):\n{r.stdout[-3000:]}")

    cross = []  # (file, strata PPL, llama PPL)

    def kld_of(t, out, extra):
        run([a.strata, "quantize", "--allow-requantize", "-t", str(a.threads), *extra, a.base, out,
             t], f"quantize {t}")
        scored = json.loads(run([a.strata, "perplexity", "-m", out, *common, "--kld", logits],
                                f"perplexity of {t}"))
        theirs = llama_ppl(out)
        if theirs is not None:
            cross.append((os.path.basename(out), scored["ppl"], theirs))
        return scored

    for t in a.types.split(","):
        out = os.path.join(a.out_dir, f"{t}.gguf")
        scored = kld_of(t, out, [])
        with_im = None
        if a.imatrix and any(t.startswith(w) for w in weighted):
            with_im = kld_of(t, os.path.join(a.out_dir, f"{t}-imatrix.gguf"),
                             ["--imatrix", a.imatrix])["kld"]["mean"]
        print(f"quantized {t}", file=sys.stderr)
        rows.append((t, out, scored, with_im))
    im_head = " KLD with imatrix |" if a.imatrix else ""
    print(f"| type | size | PPL | KLD mean |{im_head} KLD 99% | same top | tg tok/s | pp tok/s |")
    print("|---|---:|---:|---:|" + ("---:|" if a.imatrix else "") + "---:|---:|---:|---:|")
    for name, path, ppl, with_im in rows:
        bench = json.loads(run([a.strata, "bench", "-m", path, "-p", str(a.ctx), "-n", str(a.ctx),
                                "-r", str(a.bench_runs), "-t", str(a.threads), "--device", "none",
                                "--json"], f"bench of {name}"))
        tg = statistics.median(bench["tg"]["runs"])
        pp = statistics.median(bench["pp"]["runs"])
        k = ppl.get("kld") or {}
        size = os.path.getsize(path) / 2**20
        im = ""
        if a.imatrix:
            im = f" {with_im:.4f} |" if with_im is not None else " - |"
        print(f"| {name} | {size:.2f} MiB | {ppl['ppl']:.3f} | {k.get('mean', 0):.4f} |{im} "
              f"{k.get('p99', 0):.3f} | {100 * k.get('same_top', 1):.1f}% | {tg:.0f} | {pp:.0f} |",
              flush=True)
    if cross:
        print("\n| file | PPL in strata | PPL in llama.cpp (f32 attention) | difference |")
        print("|---|---:|---:|---:|")
        for name, ours, theirs in cross:
            print(f"| {name} | {ours:.4f} | {theirs:.4f} | {100 * (ours / theirs - 1):+.3f}% |")


if __name__ == "__main__":
    main()
