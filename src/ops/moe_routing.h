#pragma once
// Router of a Mixture-of-Experts layer: softmax over the experts' logits, the top-k experts,
// and their weights (renormalized over the chosen k when asked, as Qwen3-MoE does).

#include <cstdint>

namespace strata::ops {

// logits: [n_expert]. Writes k expert ids (best first) and their weights.
void route_top_k(const float* logits, int64_t n_expert, int64_t k, bool renormalize,
                 int32_t* experts, float* weights);

}  // namespace strata::ops
