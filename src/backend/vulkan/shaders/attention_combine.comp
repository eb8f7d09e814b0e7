#version 460
// Flash-decoding's second half: the block states attention.comp wrote in split mode, merged in
// block order per (token, head) as attention.comp merges them itself (attention_merge.glsl).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint64_t out_, tokens, partials, sinks;
  uint n_heads, head_dim, out_stride, splits, window, pad;
} pc;

#include "attention_merge.glsl"

void main() {
  const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
  const uint n_pos = uint(Ints(pc.tokens).v[2u * t]);
  const uint dims = (pc.head_dim + 63u) / 64u;
  float M = -1.0 / 0.0, L = 0.0, ACC[8], acc[8];
  for (uint i = 0u; i < 8u; ++i) ACC[i] = 0.0;
  for (uint b = first_position(n_pos, pc.window) / BLOCK_POSITIONS; b * BLOCK_POSITIONS < n_pos;
       ++b) {
    const uint64_t base = (uint64_t(t * pc.n_heads + h) * pc.splits + b) * (pc.head_dim + 2u);
    for (uint i = 0u; i < dims; ++i) {
      const uint d = tid + 64u * i;
      acc[i] = d < pc.head_dim ? ldf(pc.partials, base + 2u + d) : 0.0;
    }
    merge_block(M, L, ACC, ldf(pc.partials, base), ldf(pc.partials, base + 1u), acc, dims);
  }
  if (pc.sinks != 0ul) add_sink(M, L, ACC, ldf(pc.sinks, h), dims);
  const uint64_t obase = uint64_t(t) * pc.out_stride + h * pc.head_dim;
  for (uint i = 0u; i < dims; ++i) {
    const uint d = tid + 64u * i;
    if (d < pc.head_dim) stf(pc.out_, obase + d, L > 0.0 ? ACC[i] / L : 0.0);
  }
}
