#version 460
// Causal attention of one query head of one token over its sequence's cache (GQA: query head h
// reads KV head h / group). Position p of token t's sequence is in storage slot
//   pages[page_offset[t] + p / page_size] * page_size + p % page_size   (page_size > 0)
//   p                                                                   (page_size == 0).
// tokens: per token {n_positions, page_offset}. KV_F16 / KV_Q8_0 select the cache type.
//
// The positions are cut into blocks of BLOCK_POSITIONS. Within a block, 64 at a time: each
// thread scores one position, the chunk's max and sum update an online softmax, then each thread
// accumulates its own output dimensions. Blocks are merged in order (merge_block). Split mode
// (splits != 0: decode, few tokens over long caches, flash-decoding): workgroup z computes block z
// alone and writes {m, l, acc[head_dim]} to partials[(t * n_heads + h) * splits + z];
// attention_combine.comp merges them in order exactly as one workgroup does, so both modes give
// the same bits. Sliding windows (window != 0) skip the blocks before a token's window and start
// its first block at the window; sinks (gpt-oss, one logit per query head) join the denominator
// after the last block (add_sink).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint64_t q, out_, k_cache, v_cache, tokens, pages, partials, sinks;
  uint n_heads, n_kv_heads, head_dim, q_stride, out_stride, row_bytes, page_size, splits;
  float scale;
  uint window;
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

#include "attention_merge.glsl"

// The online softmax of one block, positions [p0, p1), from a fresh state into m, l, acc (each
// thread: its output dims tid, tid + 64, ...).
void attend_block(uint p0, uint p1, uint page_offset, uint kvh, uint tid, uint dims,
                  out float m, out float l, out float acc[8]) {
  for (uint i = 0u; i < 8u; ++i) acc[i] = 0.0;
  m = -1.0 / 0.0;
  l = 0.0;
  for (uint c0 = p0; c0 < p1; c0 += 64u) {
    const uint p = c0 + tid;
    float s = -1.0 / 0.0;
    if (p < p1) {
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
    const float e = p < p1 ? exp(s - m_new) : 0.0;
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
    const uint count = min(64u, p1 - c0);
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
}

void main() {
  const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
  const uint kvh = h / (pc.n_heads / pc.n_kv_heads);
  const uint n_pos = uint(Ints(pc.tokens).v[2u * t]);
  const uint split = gl_WorkGroupID.z;
  const uint first = first_position(n_pos, pc.window);
  if (pc.splits != 0u && (split * BLOCK_POSITIONS >= n_pos || (split + 1u) * BLOCK_POSITIONS <= first))
    return;  // uniform: no such block
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
  float m, l, acc[8];
  if (pc.splits != 0u) {  // this block only, for attention_combine.comp
    const uint p0 = split * BLOCK_POSITIONS;
    attend_block(max(p0, first), min(n_pos, p0 + BLOCK_POSITIONS), page_offset, kvh, tid, dims, m,
                 l, acc);
    const uint64_t base = (uint64_t(t * pc.n_heads + h) * pc.splits + split) * (pc.head_dim + 2u);
    if (tid == 0u) {
      stf(pc.partials, base, m);
      stf(pc.partials, base + 1u, l);
    }
    for (uint i = 0u; i < dims; ++i) {
      const uint d = tid + 64u * i;
      if (d < pc.head_dim) stf(pc.partials, base + 2u + d, acc[i]);
    }
    return;
  }
  float M = -1.0 / 0.0, L = 0.0, ACC[8];
  for (uint i = 0u; i < 8u; ++i) ACC[i] = 0.0;
  for (uint p0 = first / BLOCK_POSITIONS * BLOCK_POSITIONS; p0 < n_pos; p0 += BLOCK_POSITIONS) {
    attend_block(max(p0, first), min(n_pos, p0 + BLOCK_POSITIONS), page_offset, kvh, tid, dims, m,
                 l, acc);
    merge_block(M, L, ACC, m, l, acc, dims);
  }
  if (pc.sinks != 0ul) add_sink(M, L, ACC, ldf(pc.sinks, h), dims);
  const uint64_t obase = uint64_t(t) * pc.out_stride + h * pc.head_dim;
  for (uint i = 0u; i < dims; ++i) {
    const uint d = tid + 64u * i;
    if (d < pc.head_dim) stf(pc.out_, obase + d, L > 0.0 ? ACC[i] / L : 0.0);
  }
}
