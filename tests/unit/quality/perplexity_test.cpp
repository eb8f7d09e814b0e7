// Perplexity's arithmetic against closed forms, and its chunking against a direct computation
// over a model's own logits.
#include "quality/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "model/model.h"
#include "runtime/session.h"
#include "support/test_support.h"
#include "util/error.h"

namespace strata::quality {
namespace {

TEST(Perplexity, NegativeLogLikelihoodOfASoftmax) {
  // Logits ln 1, ln 2, ln 3, ln 4: probabilities 1/10 .. 4/10.
  const std::vector<float> logits = {0.0f, std::log(2.0f), std::log(3.0f), std::log(4.0f)};
  EXPECT_NEAR(negative_log_likelihood(logits, 0), std::log(10.0), 1e-6);
  EXPECT_NEAR(negative_log_likelihood(logits, 3), std::log(10.0 / 4), 1e-6);
  // Shifting every logit changes nothing, even far from zero.
  std::vector<float> shifted = logits;
  for (float& l : shifted) l += 1000.0f;
  EXPECT_NEAR(negative_log_likelihood(shifted, 3), std::log(10.0 / 4), 1e-4);
  EXPECT_THROW(negative_log_likelihood(logits, 4), Error);
}

TEST(Perplexity, EstimateAndItsErrorAsLlamaPerplexityComputesThem) {
  NllAccumulator a;
  const std::vector<double> nll = {1.0, 2.0, 3.0, 6.0};
  for (double v : nll) a.add(v);
  const PerplexityEstimate e = a.estimate(1);
  const double mean = 3.0, variance = (1 + 4 + 9 + 36) / 4.0 - mean * mean;  // 3.5
  EXPECT_EQ(e.tokens, 4);
  EXPECT_DOUBLE_EQ(e.mean_nll, mean);
  EXPECT_DOUBLE_EQ(e.ppl, std::exp(mean));
  EXPECT_DOUBLE_EQ(e.ppl_error, std::sqrt(variance / 3) * std::exp(mean));
  EXPECT_EQ(NllAccumulator().estimate(0).ppl, 0.0);
}

TEST(Perplexity, ChunksScoreTheirSecondHalfFromAnEmptyCache) {
  const auto path = test::oracle_dir() / "models" / "tiny-qwen3moe-Q8_0.gguf";
  auto model = Model::load(path.string());
  ThreadPool pool(2);
  const int64_t ctx = 16, n_vocab = model->hparams().n_vocab;
  std::vector<int32_t> tokens(45);  // two whole chunks and a remainder that is not scored
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 37 + 5) % 512);
  // Directly: each chunk alone (BOS 7 in front), positions 8..14 predict 9..15.
  NllAccumulator direct;
  for (int64_t c = 0; c < 2; ++c) {
    Session alone(*model, ctx, GgmlType::F16, pool);
    std::vector<int32_t> chunk(tokens.begin() + c * ctx, tokens.begin() + (c + 1) * ctx);
    chunk[0] = 7;
    std::vector<float> logits;
    alone.eval(chunk, true, logits);
    for (int64_t r = ctx / 2; r < ctx - 1; ++r) {
      direct.add(negative_log_likelihood(
          std::span<const float>(logits.data() + r * n_vocab, static_cast<size_t>(n_vocab)),
          tokens[static_cast<size_t>(c * ctx + r + 1)]));
    }
  }
  Session session(*model, ctx, GgmlType::F16, pool);
  // Batches smaller than a chunk give the same figures as whole chunks.
  std::vector<double> seen;
  const PerplexityEstimate e =
      perplexity(session, tokens, {.ctx = ctx, .batch = 5, .bos = 7},
                 [&](const PerplexityEstimate& p) { seen.push_back(p.ppl); });
  EXPECT_EQ(e.chunks, 2);
  EXPECT_EQ(e.tokens, 2 * (ctx - ctx / 2 - 1));
  EXPECT_NEAR(e.ppl, direct.estimate(2).ppl, 1e-9 * e.ppl);
  EXPECT_NEAR(e.ppl_error, direct.estimate(2).ppl_error, 1e-9 * e.ppl);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_DOUBLE_EQ(seen.back(), e.ppl);
  EXPECT_EQ(perplexity(session, tokens, {.ctx = ctx, .max_chunks = 1}).chunks, 1);

  EXPECT_THROW(perplexity(session, std::span<const int32_t>(tokens).first(31), {.ctx = ctx}), Error)
      << "fewer than two chunks";
  Session small(*model, 8, GgmlType::F16, pool);
  EXPECT_THROW(perplexity(small, tokens, {.ctx = ctx}), Error) << "a chunk the cache cannot hold";
}

}  // namespace
}  // namespace strata::quality
