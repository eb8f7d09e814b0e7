#include "ops/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "util/error.h"

namespace strata::ops {

namespace {

// The k largest of rank[0, n) (ties to the lower id, so the choice is deterministic).
void top_k(const std::vector<float>& rank, int64_t k, int32_t* experts) {
  std::vector<int32_t> order(rank.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return rank[static_cast<size_t>(a)] > rank[static_cast<size_t>(b)] ||
           (rank[static_cast<size_t>(a)] == rank[static_cast<size_t>(b)] && a < b);
  });
  std::copy(order.begin(), order.begin() + k, experts);
}

void check_k(int64_t k, int64_t n_expert) {
  STRATA_CHECK(k >= 1 && k <= n_expert, "experts used per token {} must be 1..{}", k, n_expert);
}

}  // namespace

void route_top_k_sigmoid(const float* logits, const float* selection_bias, int64_t n_expert,
                         int64_t k, bool renormalize, float scale, int32_t* experts,
                         float* weights) {
  check_k(k, n_expert);
  std::vector<float> scores(static_cast<size_t>(n_expert)), rank(scores.size());
  for (size_t e = 0; e < scores.size(); ++e) {
    scores[e] = 1.0f / (1.0f + std::exp(-logits[e]));
    rank[e] = scores[e] + (selection_bias ? selection_bias[e] : 0.0f);
  }
  top_k(rank, k, experts);
  float chosen = 0;
  for (int64_t i = 0; i < k; ++i) {
    weights[i] = scores[static_cast<size_t>(experts[i])];
    chosen += weights[i];
  }
  const float factor = renormalize && chosen > 0 ? scale / chosen : scale;
  for (int64_t i = 0; i < k; ++i) weights[i] *= factor;
}

void route_top_k(const float* logits, int64_t n_expert, int64_t k, bool renormalize,
                 int32_t* experts, float* weights) {
  check_k(k, n_expert);
  std::vector<float> probs(logits, logits + n_expert);
  const float max = *std::max_element(probs.begin(), probs.end());
  double sum = 0;
  for (auto& p : probs) {
    p = std::exp(p - max);
    sum += p;
  }
  for (auto& p : probs) p = static_cast<float>(p / sum);

  top_k(probs, k, experts);
  double chosen = 0;
  for (int64_t i = 0; i < k; ++i) {
    weights[i] = probs[static_cast<size_t>(experts[i])];
    chosen += weights[i];
  }
  if (renormalize && chosen > 0) {
    for (int64_t i = 0; i < k; ++i) weights[i] = static_cast<float>(weights[i] / chosen);
  }
}

}  // namespace strata::ops
