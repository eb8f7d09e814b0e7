// Every plan the planner makes, the executor runs (issue 35, item 0): over every oracle model and
// architecture, GPU budgets drawn at random from nothing to more than the whole model, with the
// planner's placement or a llama.cpp placement flag, `strata logits` on lavapipe either runs
// (inside the budget, logits within the oracle's tolerance) or, for a placement the user forced
// that does not fit, refuses with the numbers. The planner's own plan is never refused.

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <regex>
#include <string>

#include "cli_test_support.h"
#include "runtime/logits_file.h"
#include "support/test_support.h"

namespace strata {
namespace {

struct OracleCase {
  std::string model;   // under the oracle directory
  std::string logits;  // its reference logits
};

std::vector<OracleCase> oracle_cases() {
  return {
      {"models/tiny-qwen3moe-Q8_0.gguf", "logits/tiny-qwen3moe-Q8_0.f16kv.orcl"},
      {"models/tiny-qwen3moe-Q4_K_M.gguf", "logits/tiny-qwen3moe-Q4_K_M.f16kv.orcl"},
      {"models/tiny-qwen3moe-IQ4_XS.gguf", "logits/tiny-qwen3moe-IQ4_XS.f16kv.orcl"},
      {"models/tiny-qwen3-Q8_0.gguf", "logits/tiny-qwen3-Q8_0.f16kv.orcl"},
      {"models/tiny-llama-Q4_K_M.gguf", "logits/tiny-llama-Q4_K_M.f16kv.orcl"},
      {"archs/models/tiny-glm4moe-Q8_0.gguf", "archs/logits/tiny-glm4moe-Q8_0.p24.f16kv.orcl"},
      {"archs/models/tiny-gpt-oss-MXFP4_MOE.gguf",
       "archs/logits/tiny-gpt-oss-MXFP4_MOE.p24.f16kv.orcl"},
      {"archs/models/tiny-mixtral-Q8_0.gguf", "archs/logits/tiny-mixtral-Q8_0.p24.f16kv.orcl"},
      {"archs/models/tiny-qwen3next-Q8_0.gguf", "archs/logits/tiny-qwen3next-Q8_0.p24.f16kv.orcl"},
      {"gdn/models/tiny-qwen35moe-Q8_0.gguf", "gdn/logits/tiny-qwen35moe-Q8_0.p24.f16kv.orcl"},
  };
}

TEST(PlanRuns, RandomBudgetsAndPlacementsRunInsideTheBudgetAndPassTheOracle) {
  SKIP_WITHOUT_GPU_BACKEND();
  std::mt19937 rng(35);
  const char* placements[] = {"", "", " --n-cpu-moe 1", " --gpu-layers 1"};
  int ran = 0, refused = 0;
  for (const OracleCase& c : oracle_cases()) {
    const std::string model = (test::oracle_dir() / c.model).string();
    const auto ref = LogitsFile::read((test::oracle_dir() / c.logits).string());
    const auto size = static_cast<double>(std::filesystem::file_size(model));
    // Four budgets per model, three below the weights (hybrid or CPU plans), one anywhere up to
    // 1.6x the file (often all of it on the GPU); one of the four placements each.
    for (const double top : {0.3, 0.7, 1.0, 1.6}) {
      const auto budget =
          static_cast<uint64_t>(std::uniform_real_distribution<double>(0.02, top)(rng) * size);
      const std::string placement = placements[rng() % 4];
      const std::string out = (test::temp_dir() / "plan_runs.orcl").string();
      const std::string what = c.model + " --vram-budget " + std::to_string(budget) + placement;
      const auto r =
          run_strata_env(lavapipe_only(), "logits -m " + model + " --device vk0 --vram-budget " +
                                              std::to_string(budget) + placement + " --tokens " +
                                              join(ref.prompt) + " -n 1 -o " + out);
      if (r.exit_code != 0) {
        // Only a placement the user forced may be refused, and only with the numbers.
        EXPECT_FALSE(placement.empty()) << what << ": the planner's own plan was refused\n"
                                        << r.output;
        EXPECT_TRUE(contains(r.output, "--vram-budget")) << what << "\n" << r.output;
        ++refused;
        continue;
      }
      ++ran;
      // Inside the budget: what the device holds for the model, as it reports it.
      const std::regex used("([0-9]+) bytes of device memory allocated, budget ([0-9]+) bytes");
      std::smatch m;
      if (std::regex_search(r.output, m, used)) {
        EXPECT_LE(std::stoull(m[1].str()), budget) << what;
        EXPECT_EQ(std::stoull(m[2].str()), budget) << what;
      } else {
        EXPECT_TRUE(contains(r.output, "holds no layer of it")) << what << "\n" << r.output;
      }
      const auto ours = LogitsFile::read(out);
      const size_t n = ref.prompt.size() * ref.n_vocab;
      ASSERT_EQ(ours.logits.size(), n) << what;
      // The oracle tests' threshold for quantized files on the GPU.
      EXPECT_LT(test::nmse(ours.logits.data(), ref.logits.data(), n), 2e-3) << what;
    }
  }
  std::printf("%d runs passed the oracle, %d forced placements refused with the numbers\n", ran,
              refused);
  EXPECT_GT(ran, 10);
}

}  // namespace
}  // namespace strata
