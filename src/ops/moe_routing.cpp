#include "ops/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "util/error.h"

namespace strata::ops {

void route_top_k(const float* logits, int64_t n_expert, int64_t k, bool renormalize,
                 int32_t* experts, float* weights) {
  STRATA_CHECK(k >= 1 && k <= n_expert, "experts used per token {} must be 1..{}", k, n_expert);
  std::vector<float> probs(logits, logits + n_expert);
  const float max = *std::max_element(probs.begin(), probs.end());
  double sum = 0;
  for (auto& p : probs) {
    p = std::exp(p - max);
    sum += p;
  }
  for (auto& p : probs) p = static_cast<float>(p / sum);

  std::vector<int32_t> order(static_cast<size_t>(n_expert));
  for (int32_t i = 0; i < n_expert; ++i) order[static_cast<size_t>(i)] = i;
  // Ties go to the lower expert id, so the choice is deterministic.
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return probs[static_cast<size_t>(a)] > probs[static_cast<size_t>(b)] ||
           (probs[static_cast<size_t>(a)] == probs[static_cast<size_t>(b)] && a < b);
  });
  double chosen = 0;
  for (int64_t i = 0; i < k; ++i) {
    experts[i] = order[static_cast<size_t>(i)];
    weights[i] = probs[static_cast<size_t>(experts[i])];
    chosen += weights[i];
  }
  if (renormalize && chosen > 0) {
    for (int64_t i = 0; i < k; ++i) weights[i] = static_cast<float>(weights[i] / chosen);
  }
}

}  // namespace strata::ops
