"""Starts a qwen3moe model with a working copy circuit (an "induction head") in its first two
layers, so that it can copy from its context from the first step on.

Why: a model this small, trained for a few million tokens, never discovers copying by itself. It
learns to guess plausible file paths and names instead of copying the ones in the question (we
tried longer runs, repeated-window curricula, pure copy data, other learning rates: no induction
head formed in 1,150 steps). Copying needs two heads that only help together (one that looks at
the previous position, one that finds the earlier occurrence of the current token), so neither
gets a gradient until the other exists. We build both at initialization; training then keeps,
tunes or reuses them like any other weights (nothing is frozen).

The residual stream gets three subspaces of `width` dimensions (dimension 0 is a constant):
    A  dims 1..width            the token's identity (its embedding there)
    B  the next width dims      the previous token's A, written by layer 0's head 0
    C  the next width dims      the copied token's A, written by layer 1's head 0
Layer 0, head 0 attends to the previous position from the constant dimension alone: its query and
key are constant vectors in the fast-rotating RoPE pairs, phased so that the score peaks at a
distance of one. Layer 1, head 0 matches the current token's A (query) against B (key) in the
slow-rotating pairs, where RoPE barely moves over the context, so it attends to the position just
after an earlier occurrence of the current token; its value carries that position's A into C, and
the output matrix reads C against the embeddings, raising the logit of the token that followed.

Scales: Adam moves every weight by about the learning rate per step, so the circuit is built in
weights far larger than that (embeddings scaled up; RMS norms make the absolute scale free)."""

import math

import torch


@torch.no_grad()
def init_copy_circuit(model, width=32, pos_pairs=4, pos_gain=3.0, match_gain=3.0,
                      embed_scale=10.0, write=0.2, out_gain=10.0):
    c = model.c
    hd, half = c.head_dim, c.head_dim // 2
    if (c.n_layer < 2 or c.n_head < 2 or c.n_head // c.n_head_kv < 2 or 1 + 4 * width > c.n_embd
            or width > half or pos_pairs > half):
        raise ValueError("model too small for a copy circuit of width %d" % width)
    A, B, B2, C = (slice(1 + k * width, 1 + (k + 1) * width) for k in range(4))
    E = model.embed.weight
    E.mul_(embed_scale)
    E[:, 0] = embed_scale * 0.1
    for sub in (B, B2, C):
        E[:, sub] = 0

    # Layer 0, query heads 0 and 1 (both read kv head 0): the previous position and the one
    # before. NEOX RoPE turns pair i of query and key by m*theta_i and n*theta_i, so with the
    # query phased by -d*theta_i the score is sum_i cos((m - n - d) * theta_i): largest at m - n = d.
    first = model.blocks[0].attn
    for w in (first.q.weight, first.k.weight, first.v.weight):
        w[:2 * hd].zero_()
    for i in range(pos_pairs):
        theta = c.rope_base ** (-i / half)
        for head, distance in ((0, 1), (1, 2)):
            first.q.weight[head * hd + i, 0] = math.cos(distance * theta)
            first.q.weight[head * hd + i + half, 0] = -math.sin(distance * theta)
        first.k.weight[i, 0] = 1.0
        for norm in (first.q_norm, first.k_norm):
            norm.weight[i] = pos_gain
            norm.weight[i + half] = pos_gain
    first.v.weight[:width, A] = torch.eye(width)
    first.o.weight[:, :2 * hd].zero_()
    first.o.weight[B, :width] = torch.eye(width) * write
    first.o.weight[B2, hd:hd + width] = torch.eye(width) * write
    for sub in (A, B, B2, C):  # nothing else in layer 0 writes over the circuit's subspaces
        first.o.weight[sub, 2 * hd:] = 0
        model.blocks[0].moe.down[:, sub] = 0

    # Layer 1, query head 0 with kv head 0, in the slowest pairs (RoPE barely turns them over the
    # context): half of them match the current token (A) with the previous one there (B), half the
    # previous token (B) with the one before there (B2). A position whose two preceding tokens
    # equal the last two scores highest: the copy follows the earlier text, not any token that
    # happened to follow the current one.
    second = model.blocks[1].attn
    for w in (second.q.weight, second.k.weight, second.v.weight):
        w[:hd].zero_()
    slow = list(range(half - width // 2, half)) + list(range(hd - width // 2, hd))
    pairs = [(A, B)] * (width // 2) + [(B, B2)] * (width // 2)
    for j, (d, (query_from, key_from)) in enumerate(zip(slow, pairs)):
        k = j % (width // 2)
        second.q.weight[d, query_from.start + k] = 1.0
        second.k.weight[d, key_from.start + k] = 1.0
        second.q_norm.weight[d] = match_gain
        second.k_norm.weight[d] = match_gain
    second.v.weight[:width, A] = torch.eye(width)
    second.o.weight[:, :hd].zero_()
    second.o.weight[C, :width] = torch.eye(width) * write
    second.o.weight[C, hd:] = 0
    model.blocks[1].moe.down[:, C] = 0
    model.output.weight[:, C] = E[:, A] * out_gain
