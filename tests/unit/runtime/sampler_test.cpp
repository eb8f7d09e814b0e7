#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <map>

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
}

}  // namespace
}  // namespace strata
