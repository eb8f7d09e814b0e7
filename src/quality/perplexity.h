#pragma once
// Perplexity as llama-perplexity computes it, so that the figures compare across engines: the
// text's tokens are cut into chunks of `ctx` tokens, each evaluated from an empty cache (its first
// token replaced by BOS where the vocabulary adds one), and the second half of each chunk is
// scored: the negative log-likelihood of token j + 1 given the logits after token j, for j in
// [ctx / 2, ctx - 1). PPL = exp(mean), its error exp(mean) * sqrt(var / (n - 1)).

#include <cstdint>
#include <functional>
#include <span>

#include "runtime/session.h"

namespace strata::quality {

struct PerplexityOptions {
  int64_t ctx = 512;       // tokens per chunk
  int64_t max_chunks = 0;  // 0: every whole chunk of the text
  int64_t batch = 512;     // tokens per forward batch within a chunk
  int32_t bos = -1;        // the BOS token that opens each chunk; -1: none
};

struct PerplexityEstimate {
  int64_t chunks = 0;  // chunks scored so far
  int64_t tokens = 0;  // tokens scored so far
  double mean_nll = 0;
  double ppl = 0;
  double ppl_error = 0;  // 0 until two tokens are scored
};

// Sums of negative log-likelihoods and their squares.
class NllAccumulator {
 public:
  void add(double nll) {
    sum_ += nll;
    sum_squares_ += nll * nll;
    ++count_;
  }
  PerplexityEstimate estimate(int64_t chunks) const;

 private:
  double sum_ = 0, sum_squares_ = 0;
  int64_t count_ = 0;
};

// -log softmax(logits)[target]: the exponentials summed in double, as llama-perplexity does.
double negative_log_likelihood(std::span<const float> logits, int32_t target);

// The chunks `tokens` holds at options.ctx (at most options.max_chunks).
int64_t perplexity_chunks(int64_t n_tokens, const PerplexityOptions& options);

// Every scored row, in order: the logits after a token and the token that follows it. The one
// scoring loop perplexity, the base logits of a KL divergence and the divergence itself share.
using RowScorer = std::function<void(std::span<const float> logits, int32_t next)>;

// Scores `tokens` (at least two chunks' worth) on `session` (its capacity at least ctx); calls
// `on_row` with each scored row and `on_chunk` with the estimate after each chunk.
PerplexityEstimate perplexity(Session& session, std::span<const int32_t> tokens,
                              const PerplexityOptions& options,
                              const std::function<void(const PerplexityEstimate&)>& on_chunk = {},
                              const RowScorer& on_row = {});

}  // namespace strata::quality
