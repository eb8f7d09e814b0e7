// The same tokens give the same logits whether they arrive as one batch (prefill), one token at
// a time (decode), or in uneven micro-batches: each path computes identical per-row products.

#include <gtest/gtest.h>

#include <cmath>

#include "batched_run.h"
#include "model/model.h"
#include "runtime/session.h"
#include "support/test_support.h"

namespace strata {
namespace {

std::vector<float> run(Model& model, const std::vector<int32_t>& tokens,
                       const std::vector<size_t>& batches, GgmlType kv_type, ThreadPool& pool) {
  return test::logits_in_batches(model, tokens, batches, kv_type, pool, 64);
}

TEST(PrefillDecode, BatchedAndTokenByTokenAgree) {
  for (const char* name : {"tiny-qwen3moe-Q4_K_M.gguf", "tiny-llama-Q8_0.gguf"}) {
    SCOPED_TRACE(name);
    auto model = Model::load((test::oracle_dir() / "models" / name).string());
    ThreadPool pool(2);
    std::vector<int32_t> tokens;
    for (int i = 0; i < 37; ++i) tokens.push_back((i * 131 + 7) % 512);
    for (GgmlType kv : {GgmlType::F16, GgmlType::Q8_0}) {
      const auto batched = run(*model, tokens, {37}, kv, pool);
      const auto single = run(*model, tokens, std::vector<size_t>(37, 1), kv, pool);
      const auto uneven = run(*model, tokens, {5, 1, 17, 2, 12}, kv, pool);
      ASSERT_EQ(batched.size(), single.size());
      double worst = 0;
      for (size_t i = 0; i < batched.size(); ++i) {
        worst = std::max(worst, double(std::fabs(batched[i] - single[i])));
        worst = std::max(worst, double(std::fabs(batched[i] - uneven[i])));
      }
      EXPECT_LT(worst, 1e-5) << "kv " << ggml_type_name(kv);
    }
  }
}

TEST(PrefillDecode, TruncateThenContinueEqualsAFreshRun) {
  auto model = Model::load((test::oracle_dir() / "models" / "tiny-qwen3moe-Q8_0.gguf").string());
  ThreadPool pool(2);
  const std::vector<int32_t> prefix = {1, 2, 3, 4, 5}, a = {9, 8, 7}, b = {100, 200};
  Session session(*model, 32, GgmlType::F16, pool);
  std::vector<float> logits, expected;
  session.eval(prefix, false, logits);
  session.eval(a, false, logits);
  session.truncate(5);  // drop `a`
  session.eval(b, true, logits);
  Session fresh(*model, 32, GgmlType::F16, pool);
  fresh.eval(prefix, false, expected);
  fresh.eval(b, true, expected);
  EXPECT_EQ(logits, expected);
  EXPECT_THROW(session.truncate(99), std::exception);
}

TEST(PrefillDecode, AFailingBatchLeavesTheSequenceUnchanged) {
  auto model = Model::load((test::oracle_dir() / "models" / "tiny-qwen3-Q8_0.gguf").string());
  ThreadPool pool(2);
  Session session(*model, 64, GgmlType::F16, pool);
  std::vector<int32_t> tokens(40, 3);
  tokens[30] = 100000;  // outside the vocabulary, in the second batch of 16
  std::vector<float> logits;
  EXPECT_THROW(session.eval(tokens, false, logits, 16), std::exception);
  EXPECT_EQ(session.position(), 0);
  tokens[30] = 3;
  session.eval(tokens, false, logits, 16);
  EXPECT_EQ(session.position(), 40);
}

TEST(PrefillDecode, ContextOverflowIsAnError) {
  auto model = Model::load((test::oracle_dir() / "models" / "tiny-qwen3-Q8_0.gguf").string());
  ThreadPool pool(1);
  Session session(*model, 8, GgmlType::F16, pool);
  std::vector<int32_t> tokens(6, 1);
  std::vector<float> logits;
  session.eval(tokens, false, logits);
  try {
    session.eval(tokens, false, logits);
    FAIL() << "expected a context overflow error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("exceed the context size 8"), std::string::npos)
        << e.what();
  }
  const int32_t bad = 512;
  EXPECT_THROW(session.eval(std::span<const int32_t>(&bad, 1), false, logits), std::exception);
}

}  // namespace
}  // namespace strata
