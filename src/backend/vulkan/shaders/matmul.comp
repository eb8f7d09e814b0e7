#version 460
// y[t][r] = W[r] . x[t] for up to 8 tokens per workgroup (decode and small batches), one weight
// row per workgroup, its 32-element groups spread over the threads; each group is decoded once
// for all the tokens. Rows of fewer than 64 groups (n_embd < 2048, small expert FFNs) share a
// workgroup: each row gets `leaves` threads, the smallest power of two >= its groups, and
// 64 / leaves rows fill the workgroup (gpu_ops.cpp's matmul_grid divides by the same count). The
// sums keep their order: the tree over 64 threads adds exact zeros above the row's groups, so
// it equals the tree over `leaves`, and matmul_tiled.comp still agrees bit for bit.
// Expert mode (ids != 0): z indexes (token, chosen expert) pairs, the weights are expert
// ids[pair] of a stacked tensor and the activation row is pair / x_div.
// With a slot map (slots != 0: a layer keeping a subset of its experts, the hot set) the stack
// holds the resident experts and expert e is at slot slots[e]; a pair whose expert is not
// resident (slot -1) gets zeros (another device computes it).
// SWIGLU builds: y = silu(W x) * (W2 x), gate and up of a (shared or routed) expert in one pass.
#include "common.glsl"
#include "quant_types.glsl"

#define THREADS 64u
#define MAX_TOK 8u
layout(local_size_x = 64) in;

layout(push_constant) uniform Push {
  uint64_t w, w2, x, y, ids, expert_stride, slots;
  uint rows, cols, n_tok, x_stride, y_stride, x_div;
} pc;

shared float partial[MAX_TOK][THREADS];
#ifdef SWIGLU
shared float partial2[MAX_TOK][THREADS];
#endif

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint groups_per_block = BLOCK_ELEMS / 32u;
  const uint n_groups = pc.cols / 32u;
  uint leaves = THREADS;
  while (leaves > 1u && leaves / 2u >= n_groups) leaves /= 2u;
  const uint lane = tid % leaves, base = tid - lane;  // base: this row's first thread
  const uint row0 = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * (THREADS / leaves);
  if (row0 >= pc.rows) return;  // uniform per workgroup
  const uint row = row0 + tid / leaves;
  const bool live = row < pc.rows;  // the last workgroup's spare rows still reach the barriers
  const uint64_t row_bytes = uint64_t(pc.cols / BLOCK_ELEMS) * BLOCK_BYTES;

  uint t0, n;
  uint64_t w = pc.w, w2 = pc.w2;
  if (pc.ids != 0ul) {
    t0 = gl_WorkGroupID.z;
    n = 1u;
    int e = Ints(pc.ids).v[t0];
    if (pc.slots != 0ul) e = Ints(pc.slots).v[e];
    if (e < 0) {  // uniform per workgroup: not resident here
      if (lane == 0u && live) stf(pc.y, uint64_t(t0) * pc.y_stride + row, 0.0);
      return;
    }
    w += uint64_t(e) * pc.expert_stride;
    w2 += uint64_t(e) * pc.expert_stride;
  } else {
    t0 = gl_WorkGroupID.z * MAX_TOK;
    n = min(MAX_TOK, pc.n_tok - t0);
  }
  w += uint64_t(row) * row_bytes;
  w2 += uint64_t(row) * row_bytes;

  float acc[MAX_TOK], acc2[MAX_TOK];
  for (uint t = 0u; t < MAX_TOK; ++t) { acc[t] = 0.0; acc2[t] = 0.0; }
  float wv[32];
  for (uint g = lane; live && g < n_groups; g += leaves) {
    const uint64_t block = w + uint64_t(g / groups_per_block) * BLOCK_BYTES;
    dequant_group(block, g % groups_per_block, wv);
#ifdef SWIGLU
    float wv2[32];
    dequant_group(w2 + uint64_t(g / groups_per_block) * BLOCK_BYTES, g % groups_per_block, wv2);
#endif
    for (uint t = 0u; t < n; ++t) {
      const uint xrow = pc.ids != 0ul ? (t0 + t) / pc.x_div : t0 + t;
      const uint64_t xa = pc.x + 4ul * (uint64_t(xrow) * pc.x_stride + g * 32u);
      // precise + fma: the same rounding in every kernel (matmul_tiled.comp sums alike).
      precise float s = 0.0, s2 = 0.0;
      for (uint l = 0u; l < 32u; ++l) {
        const float xv = Floats(xa).v[l];
        s = fma(wv[l], xv, s);
#ifdef SWIGLU
        s2 = fma(wv2[l], xv, s2);
#endif
      }
      acc[t] += s;
      acc2[t] += s2;
    }
  }
  for (uint t = 0u; t < MAX_TOK; ++t) {
    partial[t][tid] = acc[t];
#ifdef SWIGLU
    partial2[t][tid] = acc2[t];
#endif
  }
  barrier();
  for (uint stride = leaves / 2u; stride > 0u; stride /= 2u) {
    if (lane < stride) {
      for (uint t = 0u; t < n; ++t) {
        partial[t][tid] += partial[t][tid + stride];
#ifdef SWIGLU
        partial2[t][tid] += partial2[t][tid + stride];
#endif
      }
    }
    barrier();
  }
  for (uint t = lane; live && t < n; t += leaves) {
    float r = partial[t][base];
#ifdef SWIGLU
    r = r / (1.0 + exp(-r)) * partial2[t][base];
#endif
    stf(pc.y, uint64_t(t0 + t) * pc.y_stride + row, r);
  }
}
