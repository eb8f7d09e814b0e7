#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>

#include "ops/argmax.h"
#include "util/error.h"

namespace strata {
namespace {
constexpr float kImpossibleLogprob = -9999.0f;
}  // namespace

int32_t argmax(std::span<const float> logits) {
  return static_cast<int32_t>(ops::argmax(logits.data(), static_cast<int64_t>(logits.size())));
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
  STRATA_CHECK(params.top_p > 0.0f && params.top_p <= 1.0f, "top-p must be in (0, 1], got {}",
               params.top_p);
  STRATA_CHECK(params.min_p >= 0.0f && params.min_p < 1.0f, "min-p must be in [0, 1), got {}",
               params.min_p);
  STRATA_CHECK(std::isfinite(params.temperature), "temperature must be finite");
  STRATA_CHECK(params.repetition_penalty > 0.0f && std::isfinite(params.repetition_penalty),
               "repetition penalty must be positive, got {}", params.repetition_penalty);
  STRATA_CHECK(params.penalty_last_n >= -1, "penalty window must be >= -1, got {}",
               params.penalty_last_n);
  STRATA_CHECK(std::isfinite(params.presence_penalty) && std::isfinite(params.frequency_penalty),
               "presence and frequency penalties must be finite");
  for (const auto& [token, bias] : params.logit_bias) {
    STRATA_CHECK(token >= 0, "logit bias for a negative token id {}", token);
    STRATA_CHECK(std::isfinite(bias), "logit bias of token {} is not finite", token);
  }
}

void Sampler::accept(int32_t token, bool generated) {
  // Counts only for the penalties that read them.
  if (generated && (params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f))
    ++generated_[token];
  if (params_.repetition_penalty == 1.0f || params_.penalty_last_n == 0) return;
  if (params_.penalty_last_n < 0 || recent_.size() < static_cast<size_t>(params_.penalty_last_n)) {
    recent_.push_back(token);
  } else {
    recent_[recent_next_] = token;
    recent_next_ = (recent_next_ + 1) % recent_.size();
  }
}

std::span<const float> Sampler::adjust(std::span<const float> logits) {
  // Untouched logits are read where they are (no copy of the vocabulary per token); accept keeps
  // recent_ and generated_ only for the penalties that read them.
  const bool penalize = !recent_.empty() || !generated_.empty();
  if (params_.logit_bias.empty() && !penalize) return logits;
  adjusted_.assign(logits.begin(), logits.end());
  const auto in_range = [&](int32_t t) {
    return t >= 0 && static_cast<size_t>(t) < adjusted_.size();
  };
  for (const auto& [token, bias] : params_.logit_bias) {
    if (in_range(token)) adjusted_[static_cast<size_t>(token)] += bias;
  }
  if (params_.repetition_penalty != 1.0f) {
    // A token seen several times in the window is penalized once.
    std::vector<int32_t> seen(recent_);
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (const int32_t t : seen) {
      if (!in_range(t)) continue;
      float& l = adjusted_[static_cast<size_t>(t)];
      l = l > 0 ? l / params_.repetition_penalty : l * params_.repetition_penalty;
    }
  }
  if (params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f) {
    for (const auto& [t, count] : generated_) {
      if (in_range(t))
        adjusted_[static_cast<size_t>(t)] -=
            params_.presence_penalty + params_.frequency_penalty * static_cast<float>(count);
    }
  }
  return adjusted_;
}

int32_t Sampler::sample(std::span<const float> raw_logits) {
  STRATA_CHECK(!raw_logits.empty(), "no logits to sample from");
  const std::span<const float> logits = adjust(raw_logits);
  last_ = logits;
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

TokenLogprobs Sampler::logprobs(int32_t token, int top_n) const {
  STRATA_CHECK(!last_.empty(), "logprobs asked before any token was sampled");
  STRATA_CHECK(token >= 0 && static_cast<size_t>(token) < last_.size(),
               "token {} is outside the logits (0..{})", token, last_.size() - 1);
  const float scale = params_.temperature > 0.0f ? 1.0f / params_.temperature : 1.0f;
  const float max = *std::max_element(last_.begin(), last_.end());
  double total = 0;
  for (const float l : last_) total += std::exp(static_cast<double>((l - max) * scale));
  const double log_total = std::log(total);
  const auto logprob_of = [&](int32_t t) {
    const float l = last_[static_cast<size_t>(t)];
    if (!std::isfinite(l)) return kImpossibleLogprob;
    return std::max(kImpossibleLogprob,
                    static_cast<float>(static_cast<double>((l - max) * scale) - log_total));
  };
  TokenLogprobs out;
  out.chosen = {token, logprob_of(token)};
  const size_t n = std::min(static_cast<size_t>(std::max(top_n, 0)), last_.size());
  if (n == 0) return out;
  std::vector<int32_t> ids(last_.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  std::partial_sort(ids.begin(), ids.begin() + static_cast<long>(n), ids.end(),
                    [&](int32_t a, int32_t b) {
                      const float la = last_[static_cast<size_t>(a)];
                      const float lb = last_[static_cast<size_t>(b)];
                      return la > lb || (la == lb && a < b);
                    });
  for (size_t i = 0; i < n; ++i) out.top.push_back({ids[i], logprob_of(ids[i])});
  return out;
}

}  // namespace strata
