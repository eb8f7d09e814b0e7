#pragma once
// Picks the next token from logits: logit bias and repetition / presence / frequency penalties
// first, then greedy at temperature 0, otherwise temperature, top-k, top-p (nucleus) and min-p
// filtering, then a draw from a seeded generator (reproducible).

#include <cstdint>
#include <random>
#include <span>
#include <unordered_map>
#include <vector>

namespace strata {

struct SamplingParams {
  float temperature = 0.0f;  // <= 0: greedy
  int32_t top_k = 0;         // <= 0: all tokens
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
  uint64_t seed = 0;
  // Penalties on tokens already seen (see Sampler::accept). Repetition (llama.cpp / HF style):
  // logits of tokens among the last `penalty_last_n` are divided by it when positive, multiplied
  // when negative. Presence / frequency (OpenAI): subtract presence once per seen token and
  // frequency x its count among the generated tokens.
  float repetition_penalty = 1.0f;  // 1: off
  int32_t penalty_last_n = 64;      // window of the repetition penalty; -1: everything seen
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::vector<std::pair<int32_t, float>> logit_bias{};  // added to those tokens' logits
};

// A token with its log-probability, and the likeliest alternatives at that step.
struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;
};
struct TokenLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;  // likeliest first
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  int32_t sample(std::span<const float> logits);
  // Log-probabilities at the last sample() (call before accept()): of `token` and of the `top_n`
  // likeliest tokens, under the distribution that draw used: the logits after bias, penalties
  // and any mask, over the temperature (1 for greedy), before top-k / top-p / min-p cut the tail.
  // Impossible tokens get -9999 (JSON has no -infinity).
  TokenLogprobs logprobs(int32_t token, int top_n) const;
  // Records a token for the penalties: prompt tokens (generated = false) count for the
  // repetition penalty only, generated ones for all three.
  void accept(int32_t token, bool generated = true);

 private:
  // The logits after bias and penalties (the input itself when neither applies).
  std::span<const float> adjust(std::span<const float> logits);

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;
  std::vector<float> adjusted_;  // logits after bias and penalties
  std::span<const float> last_;  // the logits the last sample() drew from (before temperature)
  std::vector<int32_t> recent_;  // ring of the last penalty_last_n tokens
  size_t recent_next_ = 0;
  std::unordered_map<int32_t, int32_t> generated_;  // generated token -> count
};

// Index of the largest logit (lowest index on ties).
int32_t argmax(std::span<const float> logits);

}  // namespace strata
