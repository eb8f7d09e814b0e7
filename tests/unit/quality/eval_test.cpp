// Eval's scoring against the same model's logits computed in one pass, and its statistics against
// closed forms.
#include "quality/eval.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "model/model.h"
#include "quality/perplexity.h"
#include "runtime/session.h"
#include "support/test_support.h"

namespace strata::quality {
namespace {

TEST(Eval, ContinuationLikelihoodAndGreedyAnswersMatchOnePassOverEverything) {
  auto model = Model::load((test::oracle_dir() / "models" / "tiny-qwen3moe-Q8_0.gguf").string());
  ThreadPool pool(2);
  const int64_t n_vocab = model->hparams().n_vocab;
  const std::vector<int32_t> prompt = {5, 17, 99, 3, 250, 11};
  const std::vector<int32_t> a = {40, 41, 42}, b = {7};
  Session session(*model, 64, GgmlType::F16, pool);
  const PromptState state = run_prompt(session, prompt);
  // Two continuations from the same prompt run, each against prompt + continuation in one pass.
  for (const auto& c : {a, b, a}) {
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), c.begin(), c.end());
    Session whole(*model, 64, GgmlType::F16, pool);
    std::vector<float> logits;
    whole.eval(all, true, logits);
    double expected = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      const size_t row = prompt.size() - 1 + i;
      expected -= negative_log_likelihood(
          std::span<const float>(logits.data() + row * n_vocab, static_cast<size_t>(n_vocab)),
          c[i]);
    }
    EXPECT_NEAR(continuation_log_likelihood(session, state, c), expected,
                1e-3 * std::abs(expected));
  }
  // A greedy answer: each token the most likely after the ones before it, stopped by `stop`.
  const std::vector<int32_t> answer = greedy_answer(session, state, 6, {});
  ASSERT_EQ(answer.size(), 6u);
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), answer.begin(), answer.end());
  Session whole(*model, 64, GgmlType::F16, pool);
  std::vector<float> logits;
  whole.eval(all, true, logits);
  for (size_t i = 0; i < answer.size(); ++i) {
    const float* row = logits.data() + (prompt.size() - 1 + i) * n_vocab;
    EXPECT_EQ(std::max_element(row, row + n_vocab) - row, answer[i]) << "token " << i;
  }
  const std::vector<int32_t> stop = {answer[2]};
  const std::vector<int32_t> stopped = greedy_answer(session, state, 6, stop);
  // (the first time the stop token comes: a random model may say it earlier too)
  const auto first = std::find(answer.begin(), answer.end(), answer[2]);
  EXPECT_EQ(stopped, std::vector<int32_t>(answer.begin(), first));
}

TEST(Eval, WilsonIntervalAndAnswerMatching) {
  const Interval none = wilson_interval(0, 10);
  EXPECT_DOUBLE_EQ(none.low, 0.0);
  EXPECT_NEAR(none.high, 0.2775, 1e-4);
  const Interval half = wilson_interval(5, 10);
  EXPECT_NEAR(half.low, 0.2366, 1e-4);
  EXPECT_NEAR(half.high, 0.7634, 1e-4);
  EXPECT_TRUE(answers_match("  Paris.\n", "paris"));
  EXPECT_TRUE(answers_match("`a.py` defines `f` (function).", "`a.py` defines `f` (function)."));
  EXPECT_FALSE(answers_match("Paris, France", "Paris"));
}

}  // namespace
}  // namespace strata::quality
