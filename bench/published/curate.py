#!/usr/bin/env python3
"""Builds runs.json (what strata's cost-model fit and its cross-validation read) from raw.jsonl
(the published runs as collected, one JSON object per line, with source address and evidence).

Every raw row is kept. A row is either used, with the facts the model needs, each marked where it
was not in the source (`assumed`: what was filled in and from what), or excluded with the reason.
Run: python3 bench/published/curate.py  (rewrites bench/published/runs.json)"""
import json
import math
import os

HERE = os.path.dirname(os.path.abspath(__file__))

# Published GPU specs: memory (GB), bandwidth (GB/s), the PCIe link assumed when the source does
# not give it (the generation the card and its usual platform support, x16), and the dense FP16
# tensor throughput (TFLOPS, FP16 accumulate) of the vendor's specification.
GPUS = {
    "RTX 3060": (12, 360, 32, 51.2), "RTX 4070": (12, 504, 32, 116.8),
    "RTX 4080": (16, 717, 32, 194.9), "RTX 3090": (24, 936, 32, 142.3),
    "RTX 3090 FE": (24, 936, 32, 142.3), "RTX 3090 Ti": (24, 1008, 32, 160.0),
    "Quadro RTX 5000": (16, 448, 16, 89.2), "RTX 2080": (8, 448, 16, 80.5),
    "RTX 5080": (16, 960, 32, 225.1), "RTX 5070 Ti": (16, 896, 32, 175.8),
    "Radeon RX 7900 XT": (20, 800, 32, 103.0), "RTX PRO 6000 Blackwell": (96, 1792, 32, 503.8),
}

# Which helper row (file order of raw.jsonl) is used, and the facts filled in for it.
# Keys: arch (strata preset), size (file GB as published) or bpw (of a single-type file), ram
# (GB/s and kind), cores, avx512, kv (bytes per element, K and V averaged), pcie, and exclusions.
def ram(mts, channels, bus_bits=64):
    return round(mts * bus_bits / 8 * channels / 1000, 1)

def machine(cores, avx512, ram_gbps, ram_kind, note=""):
    return {"cores": cores, "avx512": avx512, "ram_gbps": ram_gbps, "ram_kind": ram_kind,
            "machine_note": note}

R7900 = machine(12, True, ram(5600, 2), "derived", "Ryzen 9 7900, DDR5-5600 x 2 channels")
I12600 = machine(10, False, ram(5867, 2), "derived", "i5-12600K (6P+4E), DDR5-5867 x 2")
I12600_6000 = machine(10, False, ram(6000, 2), "derived", "i5-12600K, DDR5-6000 x 2")
R7950 = machine(16, True, ram(6000, 2), "assumed",
                "Ryzen 9 7950X; RAM speed not published: dual-channel DDR5-6000 assumed")
R9950 = machine(16, True, ram(6000, 2), "assumed",
                "Ryzen 9 9950X, 2 DIMMs; speed not published: DDR5-6000 assumed")
R9950_4800 = machine(16, True, ram(4800, 2), "derived", "Ryzen 9 9950X, DDR5-4800 x 2")
AIMAX = machine(16, True, 256.0, "derived", "Ryzen AI MAX+ 395, LPDDR5X-8000, 256-bit")
GOC_4000 = machine(6, False, ram(4000, 2), "assumed",
                   "Intel desktop (6 P-cores used), DDR5-4000; 2 channels assumed")
GOC_4800 = machine(6, False, ram(4788, 2), "assumed",
                   "Intel desktop (6 P-cores used), DDR5-4788; 2 channels assumed")
I10900X = machine(10, True, 102.0, "measured", "i9-10900X, quad-channel DDR4 measured 102 GB/s")
E5_1660 = machine(8, False, 55.0, "measured", "Xeon E5-1660 v4, quad DDR4 ~55 GB/s (author's)")
I8700 = machine(6, False, ram(2666, 2), "assumed",
                "i7-8700; RAM not published: dual-channel DDR4-2666 assumed")
TR3995 = machine(64, False, ram(3200, 8), "assumed",
                 "Threadripper PRO 3995WX; RAM not published: 8 x DDR4-3200 assumed")
EPYC9175 = machine(16, True, ram(6400, 12), "derived", "EPYC 9175F, 12 x DDR5-6400")
GPU_ONLY = machine(8, False, 0.0, "not needed", "every layer on the GPU: CPU and RAM unused")

def use(machine_facts, arch, **kw):
    d = dict(machine_facts)
    d["arch"] = arch
    d.update(kw)
    return d

QWEN3_30B_Q5KM = dict(size=21.7, assumed_size="Q5_K_M of Qwen3-30B-A3B: 21.7 GB (HF listing)")
USE = {
    # gpt-oss / GLM-4.5-Air
    0: use(R7900, "gpt-oss-20b", size=13.78), 1: use(R7900, "gpt-oss-120b", size=65.36),
    2: use(R7900, "glm-4.5-air", size=66.86), 3: use(R7900, "glm-4.5-air", size=66.86),
    4: use(R7900, "glm-4.5-air", size=66.86),
    6: use(I12600, "gpt-oss-120b", size=63.4), 7: use(I12600, "gpt-oss-120b", size=63.4),
    8: use(I12600, "gpt-oss-120b", size=63.4), 9: use(I12600, "gpt-oss-120b", size=63.4),
    10: use(I12600, "gpt-oss-120b", size=63.4),
    41: use(GPU_ONLY, "gpt-oss-20b", size=13.78),
    50: use(GPU_ONLY, "gpt-oss-20b", size=12.1),
}
for i in range(12, 19):
    USE[i] = use(GPU_ONLY, "gpt-oss-20b", size=12.1)
for i in list(range(19, 27)) + [47, 48]:
    USE[i] = use(R7950, "gpt-oss-20b", size=12.1)
for i in range(27, 31):
    USE[i] = use(AIMAX, "gpt-oss-120b", size=63.37)
# Qwen3-30B family (offset 52 in raw.jsonl)
Q = 52
for i in range(0, 13):
    USE[Q + i] = use(R7950, "qwen3-30b-a3b", size=16.5)
for i in range(13, 17):
    USE[Q + i] = use(R7950, "qwen3-30b-a3b", **QWEN3_30B_Q5KM)
USE[Q + 17] = use(R7950, "qwen3-30b-a3b", size=18.55)
for i in range(18, 24):
    USE[Q + i] = use(R9950, "qwen3-235b-a22b", size=114.7)
for i in range(24, 29):
    USE[Q + i] = use(GPU_ONLY, "qwen3-30b-a3b", size=18.98)
for i in range(29, 32):
    USE[Q + i] = use(GOC_4000, "qwen3-30b-a3b", size=18.55)
for i in range(32, 35):
    USE[Q + i] = use(GOC_4800, "qwen3-30b-a3b", size=18.55)
USE[Q + 37] = use(I10900X, "qwen3-30b-a3b", size=18.56, pcie=16,
                  assumed_size="Q4_K_M of the Qwen3-30B-A3B shape: 18.56 GB (FIELD C2)")
USE[Q + 43] = use(E5_1660, "qwen3-30b-a3b", **QWEN3_30B_Q5KM)
USE[Q + 44] = use(E5_1660, "qwen3-30b-a3b", **QWEN3_30B_Q5KM)
USE[Q + 45] = use(I8700, "qwen3-30b-a3b", size=18.56)
# Qwen3-Next / Qwen3.5 / Qwen3.6 (offset 98)
N = 98
USE[N + 0] = use(R9950_4800, "qwen3.5-35b-a3b", size=36.9)
USE[N + 2] = use(R9950_4800, "qwen3.5-35b-a3b", size=20)
USE[N + 3] = use(R9950_4800, "qwen3.5-35b-a3b", size=20)
for i in range(11, 16):
    USE[N + i] = use(TR3995 if i >= 13 else GPU_ONLY, "qwen3-next-80b-a3b", bpw=4.25,
                     assumed_size="IQ4_XS file: 4.25 bits per weight (the type's), size not given")
USE[N + 19] = use(EPYC9175, "qwen3-next-80b-a3b", bpw=16.0)
USE[N + 20] = use(EPYC9175, "qwen3-next-80b-a3b", bpw=4.5,
                  assumed_size="IQ4_NL file: 4.5 bits per weight (the type's), size not given")
USE[N + 29] = use(GPU_ONLY, "qwen3.5-35b-a3b", size=11.96)
USE[N + 30] = use(GPU_ONLY, "qwen3.5-35b-a3b", size=10.88)

EXCLUDE = {
    5: "a per-tensor -ot mix the source describes only in part",
    38: "superseded: the author's older runs of this placement (--n-cpu-moe 31 = experts of 31 "
        "layers in RAM) ran at 9.7 t/s, the same placement in the author's later rows 6-10 at "
        "23 t/s on the same machine",
    39: "superseded: see row 38",
    40: "superseded: see row 38",
    11: "file size of this GLM-4.5-Air Q3_K_M not published",
    49: "-fit on: the placement it chose is not published",
    51: "-fit on: the placement it chose is not published",
    N + 1: "--fit on: the placement it chose is not published",
    N + 4: "--fit on: the placement it chose is not published",
    N + 16: "--fit on: the placement it chose is not published",
    N + 17: "--fit on: the placement it chose is not published",
    N + 18: "--fit on: the placement it chose is not published",
    Q + 38: "llmfit's figure averages prompt and generation time",
    Q + 39: "llmfit's figure averages prompt and generation time",
    Q + 40: "16 GB of RAM for a 15.3 GiB model: paging from disk",
    Q + 41: "16 GB of RAM for a 15.3 GiB model: paging from disk",
    Q + 42: "-ser 6,1 computes 6 of the 8 experts",
    N + 21: "CPU and RAM not published (experts in RAM)",
    N + 22: "CPU and RAM not published (experts in RAM)",
    N + 31: "RAM speed not published, build predates the model",
}
for i in range(31, 38):
    EXCLUDE[i] = "file size of this UD-IQ2_XXS quant not published"
for i in range(42, 47):
    EXCLUDE[i] = "RAM channels not published and 64 GB for a 59 GiB model: paging likely"
for i in (35, 36):
    EXCLUDE[Q + i] = "Arc Pro B70: no published bandwidth figure to use"
for i in range(5, 11):
    EXCLUDE[N + i] = "file size of this Qwen3.6 quant not published"
for i in range(23, 29):
    EXCLUDE[N + i] = "CPU and RAM not published (experts in RAM) or file size missing"

# Authors: one independent source per author (machines of one author are one source).
def author(group):
    g = group.lower()
    if " user " in g:
        return g.split(" user ")[1].split()[0]
    for key in ("reynardo", "carteakey", "goodolclint", "inventivehq", "professor-dano",
                "hardware-corner", "mudkipdev", "5080", "loftllc", "club-3090", "magnus919",
                "indrasmirror", "club-5060ti", "bkataru", "15396"):
        if key in g:
            return key
    return group


def kv_bytes(kv):
    kv = (kv or "f16").lower()
    if "q8_0" in kv and "v f16" in kv:
        return (34 / 32 + 2) / 2
    if "q8_0" in kv:
        return 34 / 32
    if "q4" in kv:
        return 18 / 32
    return 2.0

def placement(r):
    flags = {}
    ngl = r.get("ngl")
    if r.get("cpu_only"):
        return {"cpu_only": True}
    if ngl is not None and ngl < 99:
        flags["gpu_layers"] = ngl
    if r.get("n_cpu_moe"):
        flags["n_cpu_moe"] = r["n_cpu_moe"]
    ot = []
    for o in r.get("override_tensor") or r.get("same_overrides_as") or []:
        ot += [p for p in o.split(",") if "=" in p]
    if ot:
        flags["overrides"] = ot
    return flags

rows = [json.loads(l) for l in open(os.path.join(HERE, "raw.jsonl"))]
# Row 7 names its placement as "the same as row 6's" (fit-params derived): row 6's regex.
rows[7] = dict(rows[7], override_tensor=[], same_overrides_as=rows[6]["override_tensor"])
out = []
for i, r in enumerate(rows):
    item = {"row": i, "raw": r}
    if i in EXCLUDE:
        item["excluded"] = EXCLUDE[i]
    elif i not in USE:
        item["excluded"] = "not curated"
    else:
        u = dict(USE[i])
        gpus = []
        for g in r["gpus"]:
            name = g["name"].replace("NVIDIA ", "").replace("GeForce ", "")
            name = next((k for k in sorted(GPUS, key=len, reverse=True) if name.startswith(k)),
                        name)
            vram, gbps, pcie, tflops = GPUS[name]
            gpus.append({"name": name, "vram_gb": vram, "gbps": gbps,
                         "pcie_gbps": u.get("pcie", pcie), "tensor_tflops": tflops})
        threads = r.get("threads") or u["cores"]
        engine = "ik_llama.cpp" if r["engine"].startswith("ik") else "llama.cpp"
        ub = r.get("ubatch") or 512
        fit = {
            "source": r["source"], "author": author(r["source_group"]), "engine": engine,
            "arch": u["arch"], "gpus": gpus, "cores": u["cores"],
            "threads": threads, "avx512": u["avx512"], "ram_gbps": u["ram_gbps"],
            "ram_kind": u["ram_kind"], "machine": u["machine_note"],
            "placement": placement(r), "kv_bytes": kv_bytes(r.get("kv_type")),
            "depth": r.get("depth") or 0, "decode_tok_s": r["decode_tok_s"],
            "prompt_tok_s": r.get("prompt_tok_s"), "prompt_tokens": r.get("prompt_tokens") or 512,
            "ubatch": ub,
        }
        if "size" in u:
            fit["file_gb"] = u["size"]
        else:
            fit["bpw"] = u["bpw"]
        if "assumed_size" in u:
            fit["assumed"] = u["assumed_size"]
        if fit["ram_kind"] == "assumed":
            fit["assumed"] = (fit.get("assumed", "") + "; " + u["machine_note"]).strip("; ")
        item["fit"] = fit
    out.append(item)

with open(os.path.join(HERE, "runs.json"), "w") as f:
    json.dump(out, f, indent=1)
used = [o for o in out if "fit" in o]
print(f"{len(out)} rows, {len(used)} used from "
      f"{len(set(o['fit']['author'] for o in used))} sources, "
      f"{len(set(o['fit']['arch'] for o in used))} presets")
