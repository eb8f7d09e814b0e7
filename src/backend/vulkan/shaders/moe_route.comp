#version 460
// Router: per token, softmax over the expert logits, the k most probable experts (ties to the
// lower id, as the CPU does) and their weights, renormalized to sum 1 when asked. One
// invocation per token: n_expert is a few hundred at most.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint64_t logits, ids, weights;
  uint n_tok, n_expert, k, renormalize;
} pc;

void main() {
  const uint t = gl_GlobalInvocationID.x;
  if (t >= pc.n_tok) return;
  const uint64_t base = uint64_t(t) * pc.n_expert;
  float mx = -1.0 / 0.0;
  for (uint e = 0u; e < pc.n_expert; ++e) mx = max(mx, ldf(pc.logits, base + e));
  float sum = 0.0;
  for (uint e = 0u; e < pc.n_expert; ++e) sum += exp(ldf(pc.logits, base + e) - mx);
  float chosen = 0.0;
  uint prev = 0xffffffffu;
  float prev_logit = 1.0 / 0.0;
  for (uint j = 0u; j < pc.k; ++j) {
    // The best expert strictly after (prev_logit, prev) in (logit desc, id asc) order.
    uint best = 0xffffffffu;
    float best_logit = -1.0 / 0.0;
    for (uint e = 0u; e < pc.n_expert; ++e) {
      const float v = ldf(pc.logits, base + e);
      const bool after_prev = v < prev_logit || (v == prev_logit && e > prev);
      if (after_prev && (best == 0xffffffffu || v > best_logit)) {
        best = e;
        best_logit = v;
      }
    }
    const float w = exp(best_logit - mx) / sum;
    Ints(pc.ids).v[t * pc.k + j] = int(best);
    Floats(pc.weights).v[t * pc.k + j] = w;
    chosen += w;
    prev = best;
    prev_logit = best_logit;
  }
  if (pc.renormalize != 0u && chosen > 0.0) {
    for (uint j = 0u; j < pc.k; ++j) Floats(pc.weights).v[t * pc.k + j] /= chosen;
  }
}
