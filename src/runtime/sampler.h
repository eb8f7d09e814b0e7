#pragma once
// Picks the next token from logits: greedy at temperature 0, otherwise temperature, top-k,
// top-p (nucleus) and min-p filtering, then a draw from a seeded generator (reproducible).

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace strata {

struct SamplingParams {
  float temperature = 0.0f;  // <= 0: greedy
  int32_t top_k = 0;         // <= 0: all tokens
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  int32_t sample(std::span<const float> logits);

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;
};

// Index of the largest logit (lowest index on ties).
int32_t argmax(std::span<const float> logits);

}  // namespace strata
