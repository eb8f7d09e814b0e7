#version 460
// out[t][i] = sum_j weights[t][j] * down[t * k + j][i], plus the shared expert when present:
// + sigmoid(shared_logit[t]) * shared[t][i] (shared_logit == 0: weight 1).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint64_t down, weights, out_, shared_, shared_logit;
  uint n_tok, n_embd, k;
} pc;

void main() {
  const uint id = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
  if (id >= pc.n_tok * pc.n_embd) return;
  const uint t = id / pc.n_embd, i = id % pc.n_embd;
  float s = 0.0;
  for (uint j = 0u; j < pc.k; ++j) {
    s += Floats(pc.weights).v[t * pc.k + j] * ldf(pc.down, uint64_t(t * pc.k + j) * pc.n_embd + i);
  }
  if (pc.shared_ != 0ul) {
    float g = 1.0;
    if (pc.shared_logit != 0ul) g = 1.0 / (1.0 + exp(-Floats(pc.shared_logit).v[t]));
    s += g * Floats(pc.shared_).v[id];
  }
  Floats(pc.out_).v[id] = s;
}
