#version 460
// Router: per token, the k best experts (ties to the lower id, as the CPU does) and their
// weights, times `scale`. Softmax gating: the most probable experts, weighted by their
// probabilities (renormalized to sum 1 when asked). Sigmoid gating (GLM-4.5): experts ranked by
// sigmoid(logit) + selection_bias (0: none), weighted by the unbiased sigmoid, normalized when
// asked. One invocation per token: n_expert is a few hundred at most.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint64_t logits, ids, weights, selection_bias;
  uint n_tok, n_expert, k, renormalize, sigmoid_gating;
  uint scale_bits;
} pc;

float score(uint64_t base, uint e) {
  const float l = ldf(pc.logits, base + e);
  return pc.sigmoid_gating != 0u ? 1.0 / (1.0 + exp(-l)) : l;
}

float rank(uint64_t base, uint e) {
  const float s = score(base, e);
  return pc.selection_bias != 0ul ? s + ldf(pc.selection_bias, e) : s;
}

void main() {
  const uint t = gl_GlobalInvocationID.x;
  if (t >= pc.n_tok) return;
  const uint64_t base = uint64_t(t) * pc.n_expert;
  float mx = -1.0 / 0.0;
  float sum = 0.0;
  if (pc.sigmoid_gating == 0u) {
    for (uint e = 0u; e < pc.n_expert; ++e) mx = max(mx, ldf(pc.logits, base + e));
    for (uint e = 0u; e < pc.n_expert; ++e) sum += exp(ldf(pc.logits, base + e) - mx);
  }
  float chosen = 0.0;
  uint prev = 0xffffffffu;
  float prev_rank = 1.0 / 0.0;
  for (uint j = 0u; j < pc.k; ++j) {
    // The best expert strictly after (prev_rank, prev) in (rank desc, id asc) order.
    uint best = 0xffffffffu;
    float best_rank = -1.0 / 0.0;
    for (uint e = 0u; e < pc.n_expert; ++e) {
      const float v = rank(base, e);
      const bool after_prev = v < prev_rank || (v == prev_rank && e > prev);
      if (after_prev && (best == 0xffffffffu || v > best_rank)) {
        best = e;
        best_rank = v;
      }
    }
    const float w = pc.sigmoid_gating != 0u ? score(base, best)
                                            : exp(ldf(pc.logits, base + best) - mx) / sum;
    Ints(pc.ids).v[t * pc.k + j] = int(best);
    Floats(pc.weights).v[t * pc.k + j] = w;
    chosen += w;
    prev = best;
    prev_rank = best_rank;
  }
  const float scale = uintBitsToFloat(pc.scale_bits);
  const float factor = pc.renormalize != 0u && chosen > 0.0 ? scale / chosen : scale;
  for (uint j = 0u; j < pc.k; ++j) Floats(pc.weights).v[t * pc.k + j] *= factor;
}
