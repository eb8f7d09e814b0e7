#version 460
// Rotary embeddings in place on x[t][head][head_dim] at positions[t]. NORM rotates pairs
// (2i, 2i+1), NEOX pairs (i, i + n_rot/2); dims past n_rot are left alone. inv_freq[i] comes
// from the host (the CPU's own table, so angles agree), followed by the scale of cos and sin
// (YaRN's attention factor; 1 without YaRN) at inv_freq[n_rot / 2].
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint64_t x, positions, inv_freq;
  uint n_tok, n_heads, head_dim, n_rot, neox, token_stride;
} pc;

void main() {
  const uint half_ = pc.n_rot / 2u;
  const uint id = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
  if (id >= pc.n_tok * pc.n_heads * half_) return;
  const uint i = id % half_, h = (id / half_) % pc.n_heads, t = id / (half_ * pc.n_heads);
  const float angle = float(Ints(pc.positions).v[t]) * Floats(pc.inv_freq).v[i];
  const float magnitude = Floats(pc.inv_freq).v[half_];
  const float c = cos(angle) * magnitude, s = sin(angle) * magnitude;
  const uint64_t base = uint64_t(t) * pc.token_stride + h * pc.head_dim;
  const uint a = pc.neox != 0u ? i : 2u * i;
  const uint b = pc.neox != 0u ? i + half_ : 2u * i + 1u;
  const float x0 = ldf(pc.x, base + a), x1 = ldf(pc.x, base + b);
  stf(pc.x, base + a, x0 * c - x1 * s);
  stf(pc.x, base + b, x0 * s + x1 * c);
}
