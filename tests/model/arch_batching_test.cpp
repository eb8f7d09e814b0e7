// The architectures of ../shared/oracle/archs give the same logits however their tokens are
// batched: one prefill, one token at a time, uneven micro-batches, and two sequences sharing
// batches. 100 tokens put gpt-oss's sliding window (16) past the first 64-position attention
// chunk, and qwen3next's recurrent state through every batching; equality is exact, for the
// reasons given in gdn_state_test.cpp (sliding windows skip whole chunks and mask the head of one,
// the same for a token whatever shares its block).

#include <gtest/gtest.h>

#include <cmath>

#include "batched_run.h"
#include "model/model.h"
#include "support/test_support.h"

namespace strata {
namespace {

class ArchBatching : public testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<Model> load() const {
    return Model::load((test::oracle_dir() / "archs" / "models" / GetParam()).string());
  }
};

TEST_P(ArchBatching, PrefillDecodeAndMicroBatchesAgree) {
  auto model = load();
  ThreadPool pool(2);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 100; ++i) tokens.push_back((i * 131 + 7) % 512);
  const auto run = [&](const std::vector<size_t>& batches) {
    return test::logits_in_batches(*model, tokens, batches, GgmlType::F16, pool);
  };
  const auto batched = run({100});
  EXPECT_EQ(batched, run(std::vector<size_t>(100, 1)));
  EXPECT_EQ(batched, run({5, 1, 58, 2, 33, 1}));
}

TEST_P(ArchBatching, MixedSequencesEqualSeparateRuns) {
  auto model = load();
  ThreadPool pool(2);
  test::expect_interleaved_sequences_match_alone(*model, pool);
}

INSTANTIATE_TEST_SUITE_P(Archs, ArchBatching,
                         testing::Values("tiny-gpt-oss-MXFP4_MOE.gguf", "tiny-gpt-oss-Q8_0.gguf",
                                         "tiny-glm4moe-Q4_K_M.gguf", "tiny-qwen3next-Q8_0.gguf",
                                         "tiny-qwen3next-ssmin-Q8_0.gguf",
                                         "tiny-mixtral-Q4_K_M.gguf"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param.substr(5, info.param.size() - 10);
                           for (char& ch : n) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace strata
