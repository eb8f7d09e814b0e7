#!/usr/bin/python3
"""Trains strata's small qwen3moe chat model on Python source that Debian installs and writes it
as a Q8_0 GGUF file with its BPE vocabulary and Qwen3's chat template. See README.md.

    /usr/bin/python3 tools/train/train.py --out models/strata-coder-tiny.gguf
"""

import argparse
import json
import math
import os
import random
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

import bpe
import chat_tasks as ct
import copy_circuit
import gguf_out
import qwen3moe

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", required=True, help="GGUF file to write")
    p.add_argument("--source-root", default="/usr/lib/python3.11",
                   help="Python source to learn from (Debian's standard library)")
    p.add_argument("--qwen-code-request", default=os.path.join(HERE, "qwen_code_request.json"),
                   help="Qwen Code's recorded first request (its prompt and read_file tool)")
    p.add_argument("--work", default="build/train", help="folder for the evaluation set and logs")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--steps", type=int, default=660)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--no-copy-circuit", action="store_true",
                   help="start from plain random weights (see copy_circuit.py)")
    p.add_argument("--export-only", action="store_true",
                   help="write the GGUF from WORK/model.pt (a finished run) without training")
    return p.parse_args()


SHORT, LONG = 512, 1536          # row lengths: two steps short, then one long
SHORT_ROWS, LONG_ROWS = 16, 5    # about 8k tokens a step either way
SOURCE_SHARE = 0.35              # share of rows' samples that are raw source windows


class Batches:
    """Rows of token ids packed from raw source windows and rendered chat turns."""

    def __init__(self, tok, source_ids, maker, rng):
        self.tok, self.source, self.maker, self.rng = tok, source_ids, maker, rng
        self.pending_long = []
        self.chat_rng = random.Random(rng.random())

    def chat_samples(self):
        task = self.maker.task()
        out = []
        for prompt, written in ct.turn_texts(task, self.chat_rng):
            out.append(self.tok.encode(prompt + written))
        return out

    def source_window(self, n):
        start = self.rng.randrange(0, len(self.source) - n)
        return self.source[start:start + n]

    def row(self, length):
        ids = []
        if length == LONG and self.pending_long:
            ids += self.pending_long.pop()
        while len(ids) <= length:  # one more than the row: the last target
            if self.rng.random() < SOURCE_SHARE:
                ids += self.source_window(self.rng.randint(64, SHORT))
                continue
            for s in self.chat_samples():
                if len(s) > SHORT and length == SHORT:
                    if len(s) <= LONG and len(self.pending_long) < 64:
                        self.pending_long.append(s)
                    continue
                ids += s
        return ids[:length + 1]

    def batch(self, step):
        length, rows = (LONG, LONG_ROWS) if step % 3 == 2 else (SHORT, SHORT_ROWS)
        return torch.tensor([self.row(length) for _ in range(rows)], dtype=torch.long)


def bits_per_byte(model, tok, texts, window=SHORT):
    """Held-out source: mean negative log-likelihood per byte in bits (windows of `window`)."""
    model.eval()
    nll, n_bytes = 0.0, 0
    with torch.no_grad():
        for text in texts:
            ids = [tok.special("<|endoftext|>")] + tok.encode(text)
            for s in range(0, len(ids) - 1, window):
                chunk = torch.tensor([ids[s:s + window + 1]])
                logits, _, _ = model(chunk[:, :-1])
                nll += F.cross_entropy(logits[0], chunk[0, 1:], reduction="sum").item()
        n_bytes = sum(len(t.encode("utf-8")) for t in texts)
    model.train()
    return nll / math.log(2) / n_bytes


def repeat_loss(model, windows):
    """Mean loss on the second copy of each window in `window + window`: near 0 for a model that
    copies from its context, near its plain loss for one that does not."""
    model.eval()
    with torch.no_grad():
        rows = torch.tensor([w + w for w in windows])
        logits, _, _ = model(rows[:, :-1])
        n = len(windows[0])
        second = slice(n, 2 * n - 1)  # predicting tokens 1.. of the second copy
        loss = F.cross_entropy(logits[:, second].reshape(-1, logits.shape[-1]),
                               rows[:, n + 1:].reshape(-1))
    model.train()
    return loss.item()


def gguf_tensors(model):
    c, Q, F32 = model.c, gguf_out.GGML_Q8_0, gguf_out.GGML_F32
    t = lambda x: x.detach().numpy()
    # The embedding table in Q5_0: it is only looked up, and it keeps the file under 8 MB.
    out = [("token_embd.weight", t(model.embed.weight), gguf_out.GGML_Q5_0)]
    for i, b in enumerate(model.blocks):
        p = "blk.%d." % i
        out += [(p + "attn_norm.weight", t(b.attn_norm.weight), F32),
                (p + "attn_q.weight", t(b.attn.q.weight), Q),
                (p + "attn_k.weight", t(b.attn.k.weight), Q),
                (p + "attn_v.weight", t(b.attn.v.weight), Q),
                (p + "attn_output.weight", t(b.attn.o.weight), Q),
                (p + "attn_q_norm.weight", t(b.attn.q_norm.weight), F32),
                (p + "attn_k_norm.weight", t(b.attn.k_norm.weight), F32),
                (p + "ffn_norm.weight", t(b.ffn_norm.weight), F32),
                (p + "ffn_gate_inp.weight", t(b.moe.router.weight), F32),
                (p + "ffn_gate_exps.weight", t(b.moe.gate), Q),
                (p + "ffn_up_exps.weight", t(b.moe.up), Q),
                (p + "ffn_down_exps.weight", t(b.moe.down), Q)]
    out += [("output_norm.weight", t(model.norm.weight), F32),
            ("output.weight", t(model.output.weight), Q)]
    return out


def gguf_metadata(c, tok, args):
    a = "qwen3moe."
    return {
        "general.architecture": "qwen3moe",
        "general.name": "strata-coder-tiny",
        "general.description": "strata's small trained qwen3moe (tools/train/train.py, seed %d, "
                               "%d steps)" % (args.seed, args.steps),
        "general.file_type": 7,  # mostly Q8_0
        a + "context_length": c.context, a + "embedding_length": c.n_embd,
        a + "block_count": c.n_layer, a + "feed_forward_length": c.expert_ffn,
        a + "expert_feed_forward_length": c.expert_ffn,
        a + "attention.head_count": c.n_head, a + "attention.head_count_kv": c.n_head_kv,
        a + "attention.key_length": c.head_dim, a + "attention.value_length": c.head_dim,
        a + "attention.layer_norm_rms_epsilon": c.eps, a + "rope.freq_base": c.rope_base,
        a + "expert_count": c.n_expert, a + "expert_used_count": c.n_expert_used,
        "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen2",
        "tokenizer.ggml.tokens": tok.tokens,
        "tokenizer.ggml.token_type": ("i32", tok.token_types()),
        "tokenizer.ggml.merges": [x + " " + y for x, y in tok.merges],
        "tokenizer.ggml.eos_token_id": tok.special("<|im_end|>"),
        "tokenizer.ggml.padding_token_id": tok.special("<|endoftext|>"),
        "tokenizer.ggml.bos_token_id": tok.special("<|endoftext|>"),
        "tokenizer.ggml.add_bos_token": False,
        "tokenizer.chat_template": ct.QWEN3_TEMPLATE,
        # Recommended sampling (strata serve's defaults for this file): greedy with a
        # repetition penalty. Plain greedy decoding loops in a model this small ("_and_and_...")
        # and never ends its turn; with the penalty it closes its code block and ends.
        "general.sampling.temp": 0.0,
        "general.sampling.penalty_repeat": 1.2,
        "general.sampling.penalty_last_n": 64,
    }


def main():
    args = parse_args()
    os.makedirs(args.work, exist_ok=True)
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    started = time.time()
    log = lambda *a: print("[%6.0fs]" % (time.time() - started), *a, flush=True)

    files = ct.source_files(args.source_root)
    if not files:
        sys.exit("no Python files under %s (install python3.11 or pass --source-root)"
                 % args.source_root)
    train_files = [f for f in files if not ct.is_held_out(f[0])]
    held_files = [f for f in files if ct.is_held_out(f[0])]
    log("%d source files: %d for training (%.1f MB), %d held out" % (
        len(files), len(train_files), sum(len(t) for _, t in train_files) / 1e6, len(held_files)))

    styles = ct.generic_styles() + [ct.qwen_code_style(args.qwen_code_request)]
    train_maker = ct.TaskMaker(train_files, styles, args.seed)
    held_maker = ct.TaskMaker(held_files, styles, args.seed + 1000)

    # The vocabulary: source plus rendered chats, so prose and the tool boilerplate get merges.
    rng = random.Random(args.seed)
    sample_chats = []
    for _ in range(3000):
        for prompt, written in ct.turn_texts(train_maker.task(), rng):
            sample_chats.append(prompt + written)
    n_merges = args.vocab - 256 - len(bpe.SPECIAL_TOKENS)
    merges = bpe.train([t for _, t in train_files] + sample_chats, n_merges,
                       lambda n: log("bpe: %d merges" % n))
    tok = bpe.Tokenizer(merges)
    log("vocabulary: %d tokens" % len(tok.tokens))

    eot = tok.special("<|endoftext|>")
    source_ids = []
    for _, text in train_files:
        source_ids += [eot] + tok.encode(text)
    log("training source: %d tokens (%.2f bytes/token)" % (
        len(source_ids), sum(len(t.encode()) for _, t in train_files) / len(source_ids)))

    # Held-out tasks for evaluate.py (never trained on: their files are held out).
    held_tasks = []
    for kind, make in (("read", held_maker.read_task), ("rename", held_maker.rename_task),
                       ("write", held_maker.write_task)):
        got = 0
        while got < 60:
            t = make()
            if t:
                held_tasks.append(t)
                got += 1
    with open(os.path.join(args.work, "held_out_tasks.json"), "w") as f:
        json.dump({"tasks": held_tasks, "files": [r for r, _ in held_files]}, f)

    c = qwen3moe.Config(len(tok.tokens))
    model = qwen3moe.Model(c)
    if not args.no_copy_circuit:
        copy_circuit.init_copy_circuit(model)
    held_ids = [tok.encode(t) for _, t in held_files]
    window_rng = random.Random(0)
    repeat_windows = []
    while len(repeat_windows) < 8:
        ids = window_rng.choice(held_ids)
        if len(ids) > 128:
            s = window_rng.randrange(0, len(ids) - 128)
            repeat_windows.append(ids[s:s + 128])
    log("model: %.2fM parameters" % (sum(p.numel() for p in model.parameters()) / 1e6))
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    other = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": other, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95))
    batches = Batches(tok, source_ids, train_maker, random.Random(args.seed + 7))
    warmup = 30
    curve, tokens_seen = [], 0
    train_start = time.time()
    checkpoint = os.path.join(args.work, "model.pt")
    if args.export_only:
        model.load_state_dict(torch.load(checkpoint))
    for step in range(0 if args.export_only else args.steps):
        frac = step / args.steps
        lr = args.lr * min(1.0, (step + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        ids = batches.batch(step)
        logits, balance, _ = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, c.vocab), ids[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        (loss + 0.01 * balance).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens_seen += ids[:, :-1].numel()
        curve.append({"step": step, "tokens": tokens_seen, "loss": round(loss.item(), 4)})
        if step % 50 == 0 or step == args.steps - 1:
            curve[-1]["repeat_loss"] = round(repeat_loss(model, repeat_windows), 4)
            log("step %d: loss on a repeated held-out window %.3f" % (step, curve[-1]["repeat_loss"]))
        if step % 10 == 0 or step == args.steps - 1:
            el = time.time() - train_start
            log("step %d/%d loss %.3f balance %.3f lr %.2e %.0f tok/s, %d tokens, eta %.0f min" % (
                step, args.steps, loss.item(), balance.item(), lr, tokens_seen / el, tokens_seen,
                el / (step + 1) * (args.steps - step - 1) / 60))

    held_texts = [t for _, t in held_files]
    rng_bpb = random.Random(0)
    bpb_texts = rng_bpb.sample(held_texts, min(12, len(held_texts)))
    bpb = bits_per_byte(model, tok, bpb_texts)
    log("held-out source: %.3f bits per byte over %d bytes" % (
        bpb, sum(len(t.encode()) for t in bpb_texts)))

    rep = repeat_loss(model, repeat_windows)
    log("held-out windows repeated: loss %.3f on the second copy" % rep)

    gguf_out.write(args.out, gguf_metadata(c, tok, args), gguf_tensors(model))
    log("wrote %s (%.1f MB)" % (args.out, os.path.getsize(args.out) / 1e6))
    if args.export_only:
        return
    with open(os.path.join(args.work, "train_log.json"), "w") as f:
        json.dump({"seed": args.seed, "steps": args.steps, "tokens_seen": tokens_seen,
                   "seconds": round(time.time() - started), "held_out_bits_per_byte": round(bpb, 4),
                   "held_out_repeat_loss": round(rep, 4), "copy_circuit": not args.no_copy_circuit,
                   "bpb_files": len(bpb_texts), "parameters": sum(p.numel() for p in model.parameters()),
                   "curve": curve}, f)
    torch.save(model.state_dict(), checkpoint)


if __name__ == "__main__":
    main()
