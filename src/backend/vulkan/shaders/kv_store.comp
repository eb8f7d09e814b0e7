#version 460
// Writes token t's keys and values (k, v: [n_tok][n_kv_heads * head_dim] floats) into the cache
// at storage slot slots[t]: vector (slot, head) lives at (slot * n_kv_heads + head) * row_bytes.
// KV_F16 stores halves; KV_Q8_0 quantizes each 32 values as the CPU's Q8_0 quantizer does.
// One invocation per (token, head, 32-value block).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint64_t k, v, k_cache, v_cache, slots;
  uint n_tok, n_kv_heads, head_dim, row_bytes;
} pc;

// roundf: halves away from zero, as the CPU quantizer rounds.
int round_away(float x) { return int(sign(x) * floor(abs(x) + 0.5)); }

void store_block(uint64_t src, uint64_t dst) {
#ifdef KV_F16
  for (uint l = 0u; l < 32u; ++l)
    Halfs(dst).v[l] = uint16_t(packHalf2x16(vec2(Floats(src).v[l], 0.0)) & 0xffffu);
#else
  float amax = 0.0;
  for (uint l = 0u; l < 32u; ++l) amax = max(amax, abs(Floats(src).v[l]));
  const float d = amax / 127.0;
  const float id = d != 0.0 ? 1.0 / d : 0.0;
  Halfs(dst).v[0] = uint16_t(packHalf2x16(vec2(d, 0.0)) & 0xffffu);
  for (uint l = 0u; l < 32u; l += 2u) {
    const int q0 = round_away(Floats(src).v[l] * id);
    const int q1 = round_away(Floats(src).v[l + 1u] * id);
    Halfs(dst).v[1u + l / 2u] = uint16_t((uint(q0) & 0xffu) | ((uint(q1) & 0xffu) << 8));
  }
#endif
}

void main() {
  const uint blocks = pc.head_dim / 32u;
  const uint id = gl_GlobalInvocationID.x;
  if (id >= pc.n_tok * pc.n_kv_heads * blocks) return;
  const uint blk = id % blocks, h = (id / blocks) % pc.n_kv_heads, t = id / (blocks * pc.n_kv_heads);
  const uint64_t slot = uint64_t(Ints(pc.slots).v[t]);
  const uint64_t row = (slot * pc.n_kv_heads + h) * pc.row_bytes;
#ifdef KV_F16
  const uint64_t dst_off = row + blk * 64u;
#else
  const uint64_t dst_off = row + blk * 34u;
#endif
  const uint64_t src_off = 4ul * (uint64_t(t) * pc.n_kv_heads * pc.head_dim + h * pc.head_dim + blk * 32u);
  store_block(pc.k + src_off, pc.k_cache + dst_off);
  store_block(pc.v + src_off, pc.v_cache + dst_off);
}
