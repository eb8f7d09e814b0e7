#include "ops/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/activations.h"
#include "util/error.h"

namespace strata::ops {

namespace {

// The k largest of rank[0, n), best first (ties to the lower id, so the choice is
// deterministic): kept sorted by insertion, with no allocation (a decode step routes every token
// of every layer, and a verify step's tokens one after another on one thread).
void top_k(const float* rank, int64_t n, int64_t k, int32_t* experts) {
  const auto better = [&](int32_t a, int32_t b) {
    return rank[a] > rank[b] || (rank[a] == rank[b] && a < b);
  };
  int64_t filled = 0;
  for (int32_t i = 0; i < static_cast<int32_t>(n); ++i) {
    if (filled == k && !better(i, experts[k - 1])) continue;
    int64_t at = filled < k ? filled++ : k - 1;
    for (; at > 0 && better(i, experts[at - 1]); --at) experts[at] = experts[at - 1];
    experts[at] = i;
  }
}

void check_k(int64_t k, int64_t n_expert) {
  STRATA_CHECK(k >= 1 && k <= n_expert, "experts used per token {} must be 1..{}", k, n_expert);
}

}  // namespace

void route_top_k_sigmoid(const float* logits, const float* selection_bias, int64_t n_expert,
                         int64_t k, bool renormalize, float scale, int32_t* experts,
                         float* weights) {
  check_k(k, n_expert);
  thread_local std::vector<float> scores, rank;  // reused: no allocation per token
  scores.resize(static_cast<size_t>(n_expert));
  rank.resize(scores.size());
  for (size_t e = 0; e < scores.size(); ++e) {
    scores[e] = 1.0f / (1.0f + std::exp(-logits[e]));
    rank[e] = scores[e] + (selection_bias ? selection_bias[e] : 0.0f);
  }
  top_k(rank.data(), n_expert, k, experts);
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
  thread_local std::vector<float> probs;  // reused: no allocation per token
  probs.assign(logits, logits + n_expert);
  const float max = *std::max_element(probs.begin(), probs.end());
  double sum = 0;
  for (auto& p : probs) {
    p = std::exp(p - max);
    sum += p;
  }
  for (auto& p : probs) p = static_cast<float>(p / sum);

  top_k(probs.data(), n_expert, k, experts);
  double chosen = 0;
  for (int64_t i = 0; i < k; ++i) {
    weights[i] = probs[static_cast<size_t>(experts[i])];
    chosen += weights[i];
  }
  if (renormalize && chosen > 0) {
    for (int64_t i = 0; i < k; ++i) weights[i] = static_cast<float>(weights[i] / chosen);
  }
}

// A few tokens' rows (decode, verify steps) are summed here in the one loop: cheaper than a
// round trip through the pool.
void combine_expert_rows(std::span<const int32_t> token_of, std::span<const float> weight,
                         const float* rows, int64_t n_tokens, int64_t n_embd, float* out,
                         ThreadPool& pool) {
  constexpr int64_t kInlineValues = int64_t{1} << 16, kTokensPerTask = 4;
  const auto n_slots = static_cast<int64_t>(token_of.size());
  if (n_slots * n_embd <= kInlineValues) {
    std::fill(out, out + n_tokens * n_embd, 0.0f);
    for (int64_t s = 0; s < n_slots; ++s)
      axpy(weight[static_cast<size_t>(s)], rows + s * n_embd,
           out + token_of[static_cast<size_t>(s)] * n_embd, n_embd);
    return;
  }
  // Token t's slots, in slot order: slots[first[t] .. first[t + 1]).
  std::vector<int64_t> first(static_cast<size_t>(n_tokens + 1), 0);
  for (const int32_t t : token_of) first[static_cast<size_t>(t) + 1]++;
  for (int64_t t = 0; t < n_tokens; ++t) first[t + 1] += first[t];
  std::vector<int64_t> slots(static_cast<size_t>(n_slots));
  {
    std::vector<int64_t> fill(first.begin(), first.end() - 1);
    for (int64_t s = 0; s < n_slots; ++s)
      slots[static_cast<size_t>(fill[static_cast<size_t>(token_of[static_cast<size_t>(s)])]++)] = s;
  }
  pool.run((n_tokens + kTokensPerTask - 1) / kTokensPerTask, [&](int64_t task, int) {
    for (int64_t t = task * kTokensPerTask; t < std::min(n_tokens, (task + 1) * kTokensPerTask);
         ++t) {
      float* o = out + t * n_embd;
      std::fill(o, o + n_embd, 0.0f);
      for (int64_t i = first[t]; i < first[t + 1]; ++i) {
        const int64_t s = slots[static_cast<size_t>(i)];
        axpy(weight[static_cast<size_t>(s)], rows + s * n_embd, o, n_embd);
      }
    }
  });
}

}  // namespace strata::ops
