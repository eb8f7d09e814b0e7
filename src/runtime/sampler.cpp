#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace strata {

int32_t argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
  STRATA_CHECK(params.top_p > 0.0f && params.top_p <= 1.0f, "top-p must be in (0, 1], got {}",
               params.top_p);
  STRATA_CHECK(params.min_p >= 0.0f && params.min_p < 1.0f, "min-p must be in [0, 1), got {}",
               params.min_p);
  STRATA_CHECK(std::isfinite(params.temperature), "temperature must be finite");
}

int32_t Sampler::sample(std::span<const float> logits) {
  STRATA_CHECK(!logits.empty(), "no logits to sample from");
  if (params_.temperature <= 0.0f) return argmax(logits);

  candidates_.clear();
  for (size_t i = 0; i < logits.size(); ++i)
    candidates_.emplace_back(logits[i], static_cast<int32_t>(i));
  auto by_logit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t keep = candidates_.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep) {
    keep = static_cast<size_t>(params_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<long>(keep),
                      candidates_.end(), by_logit);
    candidates_.resize(keep);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  // Softmax at the temperature over what is left (sorted, largest first).
  const float max = candidates_.front().first;
  double total = 0;
  for (auto& c : candidates_) {
    c.first = std::exp((c.first - max) / params_.temperature);
    total += c.first;
  }
  // min-p: drop tokens whose probability is below min_p times the best one's.
  size_t n = candidates_.size();
  if (params_.min_p > 0.0f) {
    const float floor = params_.min_p * candidates_.front().first;
    while (n > 1 && candidates_[n - 1].first < floor) total -= candidates_[--n].first;
  }
  // top-p: smallest prefix whose mass reaches top_p.
  if (params_.top_p < 1.0f) {
    double mass = 0;
    for (size_t i = 0; i < n; ++i) {
      mass += candidates_[i].first;
      if (mass >= params_.top_p * total) {
        n = i + 1;
        total = mass;
        break;
      }
    }
  }
  std::uniform_real_distribution<double> uniform(0.0, total);
  double r = uniform(rng_);
  for (size_t i = 0; i < n; ++i) {
    r -= candidates_[i].first;
    if (r <= 0) return candidates_[i].second;
  }
  return candidates_[n - 1].second;
}

}  // namespace strata
