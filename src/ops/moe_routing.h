#pragma once
// Router of a Mixture-of-Experts layer: softmax over the experts' logits, the top-k experts,
// and their weights (renormalized over the chosen k when asked, as Qwen3-MoE does); and the sum
// of the chosen experts' outputs by those weights.

#include <cstdint>
#include <span>

#include "util/thread_pool.h"

namespace strata::ops {

// logits: [n_expert]. Writes k expert ids (best first) and their weights.
void route_top_k(const float* logits, int64_t n_expert, int64_t k, bool renormalize,
                 int32_t* experts, float* weights);

// GLM-4.5 routing: scores = sigmoid(logits); the top k of scores + selection_bias (the
// score-correction bias, [n_expert], may be null) are chosen, but weighted by their unbiased
// scores, normalized to sum 1 when renormalize, then multiplied by scale.
void route_top_k_sigmoid(const float* logits, const float* selection_bias, int64_t n_expert,
                         int64_t k, bool renormalize, float scale, int32_t* experts,
                         float* weights);

// out[t] = the sum of weight[s] * rows[s] over the rows s with token_of[s] == t (the experts'
// outputs of [n_tokens] tokens, rows of n_embd values), added in order of s whichever thread
// sums the token: the bits of one loop over the rows. Tokens without rows get zeros.
void combine_expert_rows(std::span<const int32_t> token_of, std::span<const float> weight,
                         const float* rows, int64_t n_tokens, int64_t n_embd, float* out,
                         ThreadPool& pool);

}  // namespace strata::ops
