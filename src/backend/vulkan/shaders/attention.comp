#version 460
// Causal attention of one query head of one token over its sequence's cache (GQA: query head h
// reads KV head h / group). Positions are taken 64 at a time: each thread scores one position,
// the chunk's max and sum update an online softmax, then each thread accumulates its own output
// dimensions over the chunk. Position p of token t's sequence is in storage slot
//   pages[page_offset[t] + p / page_size] * page_size + p % page_size   (page_size > 0)
//   p                                                                   (page_size == 0).
// tokens: per token {n_positions, page_offset}. KV_F16 / KV_Q8_0 select the cache type.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint64_t q, out_, k_cache, v_cache, tokens, pages;
  uint n_heads, n_kv_heads, head_dim, q_stride, out_stride, row_bytes, page_size;
  float scale;
} pc;

#define MAX_HEAD_DIM 512u
shared float qs[MAX_HEAD_DIM];
shared float probs[64];
shared float red[64];

float kv_value(uint64_t row, uint d) {
#ifdef KV_F16
  return f16_at(row, 2u * d);
#else
  const uint64_t block = row + uint64_t(d / 32u) * 34u;
  return f16_at(block, 0u) * float(sbyte_at(block, 2u + d % 32u));
#endif
}

uint64_t slot_of(uint p, uint page_offset) {
  if (pc.page_size == 0u) return uint64_t(p);
  return uint64_t(Ints(pc.pages).v[page_offset + p / pc.page_size]) * pc.page_size + p % pc.page_size;
}

void main() {
  const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
  const uint kvh = h / (pc.n_heads / pc.n_kv_heads);
  const uint n_pos = uint(Ints(pc.tokens).v[2u * t]);
  const uint page_offset = uint(Ints(pc.tokens).v[2u * t + 1u]);
  const uint64_t qbase = uint64_t(t) * pc.q_stride + h * pc.head_dim;
  // Queries meet the keys rounded to the keys' partner format (F16 for F16 keys, Q8_0 for
  // Q8_0), as the CPU and other GGUF engines compute Q.K; the scale comes after the dot.
#ifdef KV_F16
  for (uint d = tid; d < pc.head_dim; d += 64u)
    qs[d] = unpackHalf2x16(packHalf2x16(vec2(ldf(pc.q, qbase + d), 0.0))).x;
#else
  for (uint blk = tid; blk < pc.head_dim / 32u; blk += 64u) {
    float amax = 0.0;
    for (uint l = 0u; l < 32u; ++l) amax = max(amax, abs(ldf(pc.q, qbase + blk * 32u + l)));
    const float dq = amax / 127.0;
    const float id = dq != 0.0 ? 1.0 / dq : 0.0;
    const float d16 = unpackHalf2x16(packHalf2x16(vec2(dq, 0.0))).x;
    for (uint l = 0u; l < 32u; ++l) {
      const float x = ldf(pc.q, qbase + blk * 32u + l) * id;
      qs[blk * 32u + l] = d16 * sign(x) * floor(abs(x) + 0.5);
    }
  }
#endif
  barrier();

  const uint dims = (pc.head_dim + 63u) / 64u;  // output dims per thread (<= 8)
  float acc[8];
  for (uint i = 0u; i < 8u; ++i) acc[i] = 0.0;
  float m = -1.0 / 0.0, l = 0.0;
  for (uint c0 = 0u; c0 < n_pos; c0 += 64u) {
    const uint p = c0 + tid;
    float s = -1.0 / 0.0;
    if (p < n_pos) {
      const uint64_t row = pc.k_cache + (slot_of(p, page_offset) * pc.n_kv_heads + kvh) * pc.row_bytes;
      s = 0.0;
      for (uint d = 0u; d < pc.head_dim; ++d) s += qs[d] * kv_value(row, d);
      s *= pc.scale;
    }
    red[tid] = s;
    barrier();
    for (uint stride = 32u; stride > 0u; stride /= 2u) {
      if (tid < stride) red[tid] = max(red[tid], red[tid + stride]);
      barrier();
    }
    const float m_new = max(m, red[0]);
    barrier();
    const float e = p < n_pos ? exp(s - m_new) : 0.0;
    probs[tid] = e;
    red[tid] = e;
    barrier();
    for (uint stride = 32u; stride > 0u; stride /= 2u) {
      if (tid < stride) red[tid] += red[tid + stride];
      barrier();
    }
    const float corr = exp(m - m_new);  // 0 on the first chunk (m = -inf)
    l = l * corr + red[0];
    m = m_new;
    const uint count = min(64u, n_pos - c0);
    for (uint i = 0u; i < dims; ++i) {
      const uint d = tid + 64u * i;
      if (d >= pc.head_dim) break;
      float a = acc[i] * corr;
      for (uint j = 0u; j < count; ++j) {
        const uint64_t row =
            pc.v_cache + (slot_of(c0 + j, page_offset) * pc.n_kv_heads + kvh) * pc.row_bytes;
        a += probs[j] * kv_value(row, d);
      }
      acc[i] = a;
    }
    barrier();
  }
  const uint64_t obase = uint64_t(t) * pc.out_stride + h * pc.head_dim;
  for (uint i = 0u; i < dims; ++i) {
    const uint d = tid + 64u * i;
    if (d < pc.head_dim) stf(pc.out_, obase + d, l > 0.0 ? acc[i] / l : 0.0);
  }
}
