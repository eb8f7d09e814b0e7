#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

#include "util/error.h"

namespace strata {
namespace {

TEST(Sampler, GreedyAtTemperatureZero) {
  Sampler s({.temperature = 0.0f});
  const std::vector<float> logits = {0.1f, 3.0f, 2.9f, 3.0f};
  EXPECT_EQ(s.sample(logits), 1);  // lowest index on ties
}

TEST(Sampler, TopKOneIsGreedy) {
  Sampler s({.temperature = 1.0f, .top_k = 1, .seed = 7});
  const std::vector<float> logits = {0.1f, 0.5f, 2.0f, -1.0f};
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(logits), 2);
}

TEST(Sampler, FrequenciesFollowTheSoftmax) {
  Sampler s({.temperature = 1.0f, .seed = 42});
  const std::vector<float> logits = {0.0f, std::log(3.0f)};  // p = 1/4, 3/4
  std::map<int32_t, int> counts;
  for (int i = 0; i < 20000; ++i) counts[s.sample(logits)]++;
  EXPECT_NEAR(counts[1] / 20000.0, 0.75, 0.02);
}

TEST(Sampler, TopPAndMinPCutTheTail) {
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f),
                                     std::log(0.05f)};
  Sampler top_p({.temperature = 1.0f, .top_p = 0.75f, .seed = 1});
  Sampler min_p({.temperature = 1.0f, .min_p = 0.4f, .seed = 1});
  for (int i = 0; i < 2000; ++i) {
    EXPECT_LE(top_p.sample(logits), 1);  // 0.5 + 0.3 >= 0.75
    EXPECT_LE(min_p.sample(logits), 1);  // 0.15 < 0.4 * 0.5
  }
}

TEST(Sampler, SameSeedSameSequence) {
  const std::vector<float> logits = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f};
  Sampler a({.temperature = 0.8f, .seed = 99}), b({.temperature = 0.8f, .seed = 99});
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.sample(logits), b.sample(logits));
}

TEST(Sampler, RejectsBadParameters) {
  EXPECT_ANY_THROW(Sampler({.temperature = 1.0f, .top_p = 0.0f}));
  EXPECT_ANY_THROW(Sampler({.temperature = 1.0f, .min_p = 1.5f}));
  EXPECT_ANY_THROW(Sampler({.repetition_penalty = 0.0f}));
  EXPECT_ANY_THROW(Sampler({.penalty_last_n = -2}));
  EXPECT_ANY_THROW(Sampler({.logit_bias = {{-1, 1.0f}}}));
  EXPECT_ANY_THROW(Sampler({.presence_penalty = NAN}));
}

TEST(Sampler, LogitBiasMovesTheChoice) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f};
  Sampler up({.logit_bias = {{2, 5.0f}}});
  EXPECT_EQ(up.sample(logits), 2);
  // -100 bans a token even under sampling; ids past the vocabulary are ignored.
  Sampler ban({.temperature = 1.0f, .seed = 3, .logit_bias = {{1, -100.0f}, {99, 1.0f}}});
  for (int i = 0; i < 500; ++i) EXPECT_NE(ban.sample(logits), 1);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  // 2.0 / 2.5 = 0.8 < 1.0 and -0.2 * 2.5 = -0.5 < -0.4: both seen tokens lose to unseen ones.
  const std::vector<float> pos = {2.0f, 1.0f}, neg = {-0.2f, -0.4f};
  Sampler s({.repetition_penalty = 2.5f});
  EXPECT_EQ(s.sample(pos), 0);
  s.accept(0, /*generated=*/false);  // prompt tokens count for the repetition penalty
  EXPECT_EQ(s.sample(pos), 1);
  EXPECT_EQ(s.sample(neg), 1);
}

TEST(Sampler, RepetitionPenaltyWindowForgetsOldTokens) {
  const std::vector<float> logits = {2.0f, 1.0f, 0.0f, 0.0f};
  Sampler s({.repetition_penalty = 4.0f, .penalty_last_n = 2});
  s.accept(0);
  EXPECT_EQ(s.sample(logits), 1);
  s.accept(2);
  s.accept(3);  // token 0 has left the window of 2
  EXPECT_EQ(s.sample(logits), 0);
}

TEST(Sampler, PresenceAndFrequencyPenalizeGeneratedTokensOnly) {
  const std::vector<float> logits = {3.0f, 2.0f};
  Sampler presence({.presence_penalty = 1.5f});
  presence.accept(0, /*generated=*/false);
  EXPECT_EQ(presence.sample(logits), 0);  // prompt tokens are not penalized
  presence.accept(0);
  EXPECT_EQ(presence.sample(logits), 1);  // 3 - 1.5 < 2

  Sampler frequency({.frequency_penalty = 0.4f});
  frequency.accept(0);
  frequency.accept(0);
  EXPECT_EQ(frequency.sample(logits), 0);  // 3 - 0.8 > 2
  frequency.accept(0);
  EXPECT_EQ(frequency.sample(logits), 1);  // 3 - 1.2 < 2
}

// Log-probabilities are a log-softmax of the logits the draw used, computed here independently.
TEST(Sampler, LogprobsAreTheLogSoftmaxOfWhatWasSampledFrom) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, -1.0f};
  const auto log_softmax = [&](size_t i, float t) {
    double total = 0;
    for (float l : logits) total += std::exp(l / t);
    return std::log(std::exp(logits[i] / t) / total);
  };
  Sampler greedy({.temperature = 0.0f});
  ASSERT_EQ(greedy.sample(logits), 1);
  TokenLogprobs lp = greedy.logprobs(1, 3);
  EXPECT_EQ(lp.chosen.token, 1);
  EXPECT_NEAR(lp.chosen.logprob, log_softmax(1, 1.0f), 1e-5);  // greedy: temperature 1
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].token, 1);
  EXPECT_EQ(lp.top[1].token, 2);
  EXPECT_EQ(lp.top[2].token, 0);
  EXPECT_NEAR(lp.top[2].logprob, log_softmax(0, 1.0f), 1e-5);

  Sampler warm({.temperature = 0.5f, .top_k = 1, .seed = 3});  // top-k does not renormalize
  ASSERT_EQ(warm.sample(logits), 1);
  lp = warm.logprobs(1, 0);
  EXPECT_NEAR(lp.chosen.logprob, log_softmax(1, 0.5f), 1e-5);
  EXPECT_TRUE(lp.top.empty());
}

TEST(Sampler, LogprobsSeeBiasAndMaskedTokens) {
  std::vector<float> logits = {0.0f, 0.0f, -std::numeric_limits<float>::infinity()};
  Sampler s({.logit_bias = {{0, std::log(3.0f)}}});
  ASSERT_EQ(s.sample(logits), 0);
  const TokenLogprobs lp = s.logprobs(0, 5);
  EXPECT_NEAR(lp.chosen.logprob, std::log(0.75), 1e-5);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[2].token, 2);
  EXPECT_EQ(lp.top[2].logprob, -9999.0f);  // impossible, and still a finite JSON number
  EXPECT_THROW(s.logprobs(7, 0), Error);
}

}  // namespace
}  // namespace strata
