#include "quality/perplexity.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "util/error.h"

namespace strata::quality {

PerplexityEstimate NllAccumulator::estimate(int64_t chunks) const {
  PerplexityEstimate e;
  e.chunks = chunks;
  e.tokens = count_;
  if (count_ == 0) return e;
  const double n = static_cast<double>(count_);
  e.mean_nll = sum_ / n;
  e.ppl = std::exp(e.mean_nll);
  const double variance = sum_squares_ / n - e.mean_nll * e.mean_nll;
  if (count_ > 1 && variance > 0) e.ppl_error = std::sqrt(variance / (n - 1)) * e.ppl;
  return e;
}

double negative_log_likelihood(std::span<const float> logits, int32_t target) {
  STRATA_CHECK(target >= 0 && static_cast<size_t>(target) < logits.size(),
               "token {} outside a vocabulary of {}", target, logits.size());
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (const float l : logits) sum += std::exp(l - max);
  return -(static_cast<double>(logits[static_cast<size_t>(target)] - max) - std::log(sum));
}

int64_t perplexity_chunks(int64_t n_tokens, const PerplexityOptions& options) {
  const int64_t whole = options.ctx > 0 ? n_tokens / options.ctx : 0;
  return options.max_chunks > 0 ? std::min(whole, options.max_chunks) : whole;
}

PerplexityEstimate perplexity(Session& session, std::span<const int32_t> tokens,
                              const PerplexityOptions& options,
                              const std::function<void(const PerplexityEstimate&)>& on_chunk,
                              const RowScorer& on_row) {
  const int64_t ctx = options.ctx;
  STRATA_CHECK(ctx >= 4, "a perplexity chunk needs at least 4 tokens, not {}", ctx);
  STRATA_CHECK(static_cast<int64_t>(tokens.size()) >= 2 * ctx,
               "the text is {} tokens: perplexity at a context of {} needs at least {}",
               tokens.size(), ctx, 2 * ctx);
  STRATA_CHECK(session.capacity() >= ctx, "the session holds {} positions, a chunk needs {}",
               session.capacity(), ctx);
  STRATA_CHECK(options.batch >= 1, "batch must be positive");
  const int64_t n_vocab = session.model().hparams().n_vocab;
  const int64_t chunks = perplexity_chunks(static_cast<int64_t>(tokens.size()), options);
  const int64_t first = ctx / 2;
  NllAccumulator nll;
  std::vector<int32_t> chunk;
  std::vector<float> logits;
  for (int64_t c = 0; c < chunks; ++c) {
    chunk.assign(tokens.begin() + c * ctx, tokens.begin() + (c + 1) * ctx);
    if (options.bos >= 0) chunk[0] = options.bos;
    session.reset();
    for (int64_t b0 = 0; b0 < ctx; b0 += options.batch) {
      const int64_t n = std::min(options.batch, ctx - b0);
      session.eval(
          std::span<const int32_t>(chunk).subspan(static_cast<size_t>(b0), static_cast<size_t>(n)),
          true, logits, options.batch);
      for (int64_t r = std::max(b0, first); r < std::min(b0 + n, ctx - 1); ++r) {
        // The logits after token r predict token r + 1 (the text's, not the BOS).
        const std::span<const float> row(logits.data() + (r - b0) * n_vocab,
                                         static_cast<size_t>(n_vocab));
        const int32_t next = tokens[static_cast<size_t>(c * ctx + r + 1)];
        nll.add(negative_log_likelihood(row, next));
        if (on_row) on_row(row, next);
      }
    }
    if (on_chunk) on_chunk(nll.estimate(c + 1));
  }
  return nll.estimate(chunks);
}

}  // namespace strata::quality
