"""The qwen3moe architecture in PyTorch, laid out as its GGUF tensors: grouped-query attention
with RMS-normed queries and keys per head and NEOX-style RoPE, then a routed-expert SwiGLU FFN
(softmax router, top-k, weights renormalized over the chosen experts)."""

import math

import torch
import torch.nn.functional as F
from torch import nn


class Config:
    def __init__(self, vocab, n_embd=256, n_layer=4, n_head=4, n_head_kv=2, head_dim=64,
                 n_expert=16, n_expert_used=4, expert_ffn=96, rope_base=1e6, eps=1e-6,
                 context=2048):
        self.vocab, self.n_embd, self.n_layer = vocab, n_embd, n_layer
        self.n_head, self.n_head_kv, self.head_dim = n_head, n_head_kv, head_dim
        self.n_expert, self.n_expert_used, self.expert_ffn = n_expert, n_expert_used, expert_ffn
        self.rope_base, self.eps, self.context = rope_base, eps, context


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope(x, positions, base):
    """NEOX rotation: dimension i pairs with i + head_dim/2."""
    half = x.shape[-1] // 2
    freqs = base ** (-torch.arange(half, dtype=torch.float32) / half)
    angles = positions[:, None].float() * freqs[None, :]
    cos, sin = angles.cos()[None, None], angles.sin()[None, None]
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.q = nn.Linear(c.n_embd, c.n_head * c.head_dim, bias=False)
        self.k = nn.Linear(c.n_embd, c.n_head_kv * c.head_dim, bias=False)
        self.v = nn.Linear(c.n_embd, c.n_head_kv * c.head_dim, bias=False)
        self.o = nn.Linear(c.n_head * c.head_dim, c.n_embd, bias=False)
        self.q_norm = RMSNorm(c.head_dim, c.eps)
        self.k_norm = RMSNorm(c.head_dim, c.eps)

    def forward(self, x, positions, mask):
        c = self.c
        b, t, _ = x.shape
        q = self.q_norm(self.q(x).view(b, t, c.n_head, c.head_dim)).transpose(1, 2)
        q = q * (1 / math.sqrt(c.head_dim))  # scaled here: the score matrix is the big one
        k = self.k_norm(self.k(x).view(b, t, c.n_head_kv, c.head_dim)).transpose(1, 2)
        v = self.v(x).view(b, t, c.n_head_kv, c.head_dim).transpose(1, 2)
        q, k = rope(q, positions, c.rope_base), rope(k, positions, c.rope_base)
        group = c.n_head // c.n_head_kv
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        y = (q @ k.transpose(-1, -2) + mask).softmax(-1) @ v
        return self.o(y.transpose(1, 2).reshape(b, t, c.n_head * c.head_dim))


class MoE(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.router = nn.Linear(c.n_embd, c.n_expert, bias=False)
        scale = 1 / math.sqrt(c.n_embd)
        self.gate = nn.Parameter(torch.randn(c.n_expert, c.expert_ffn, c.n_embd) * scale)
        self.up = nn.Parameter(torch.randn(c.n_expert, c.expert_ffn, c.n_embd) * scale)
        self.down = nn.Parameter(
            torch.randn(c.n_expert, c.n_embd, c.expert_ffn) / math.sqrt(c.expert_ffn))

    def forward(self, x):
        c = self.c
        shape = x.shape
        x = x.reshape(-1, c.n_embd)
        probs = self.router(x).softmax(-1)
        weights, chosen = probs.topk(c.n_expert_used, dim=-1)
        weights = weights / weights.sum(-1, keepdim=True)
        out = torch.zeros_like(x)
        for e in range(c.n_expert):
            rows, slot = (chosen == e).nonzero(as_tuple=True)
            if rows.numel() == 0:
                continue
            h = x[rows]
            y = (F.silu(h @ self.gate[e].t()) * (h @ self.up[e].t())) @ self.down[e].t()
            out.index_add_(0, rows, y * weights[rows, slot, None])
        # Switch-style balance loss: share of tokens routed to each expert times its mean prob.
        share = torch.zeros(c.n_expert).index_add_(
            0, chosen.reshape(-1), torch.ones(chosen.numel())) / chosen.numel()
        balance = c.n_expert * (share * probs.mean(0)).sum()
        return out.reshape(shape), balance, chosen


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attn_norm = RMSNorm(c.n_embd, c.eps)
        self.attn = Attention(c)
        self.ffn_norm = RMSNorm(c.n_embd, c.eps)
        self.moe = MoE(c)

    def forward(self, x, positions, mask):
        x = x + self.attn(self.attn_norm(x), positions, mask)
        y, balance, chosen = self.moe(self.ffn_norm(x))
        return x + y, balance, chosen


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed = nn.Embedding(c.vocab, c.n_embd)
        nn.init.normal_(self.embed.weight, std=0.02)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.n_layer))
        self.norm = RMSNorm(c.n_embd, c.eps)
        self.output = nn.Linear(c.n_embd, c.vocab, bias=False)
        nn.init.normal_(self.output.weight, std=0.02)
        for b in self.blocks:  # residual branches start small
            nn.init.normal_(b.attn.o.weight, std=0.02 / math.sqrt(2 * c.n_layer))
            nn.init.normal_(b.moe.down, std=0.02 / math.sqrt(2 * c.n_layer))

    def forward(self, ids):
        t = ids.shape[1]
        positions = torch.arange(t)
        mask = torch.full((t, t), float("-inf")).triu(1)  # causal, added to the scores
        x = self.embed(ids)
        balance, routes = 0.0, []
        for b in self.blocks:
            x, bal, chosen = b(x, positions, mask)
            balance = balance + bal
            routes.append(chosen)
        return self.output(self.norm(x)), balance / len(self.blocks), routes
