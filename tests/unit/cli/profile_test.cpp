// `strata profile` end to end: expert selection counts over a prompt set, read by `strata plan`.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "cli_test_support.h"
#include "support/test_support.h"

namespace strata {
namespace {

TEST(ProfileCommand, CountsEveryRoutingDecisionAndFeedsThePlanner) {
  const std::string generator =
      std::filesystem::path(STRATA_EXE).parent_path() / "make-synthetic-model";
  const auto dir = test::temp_dir();
  const auto model = (dir / "profile-model.gguf").string();
  // A router that prefers a quarter of the experts, as real MoE traffic does.
  const std::string make =
      generator +
      " --ftype Q8_0 --embd 64 --heads 2 --kv-heads 1 --head-dim 32 --layers 2 "
      "--experts 16 --experts-used 2 --expert-ff 64 --vocab 512 --byte-vocab "
      "--hot-experts 0.25 --skew 6 -o " +
      model + " 2>&1";
  ASSERT_EQ(std::system(make.c_str()), 0);
  const auto prompts = (dir / "prompts.txt").string();
  {
    std::ofstream f(prompts);
    f << "The quick brown fox jumps over the lazy dog.\n\n"
      << R"({"messages": [{"role": "user", "content": "Hello, who are you?"}]})"
      << "\n";
  }
  const auto out = (dir / "experts.json").string();
  auto r = run_strata("profile -m " + model + " --prompts " + prompts + " -n 5 -o " + out, true);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The summary names how many experts it counts as the busiest (a tenth of 16, rounded: 2) and
  // what uniform routing would give them.
  EXPECT_NE(r.output.find("the busiest 2 of 16 experts in a layer took"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("(uniform: 12.5%)"), std::string::npos) << r.output;
  std::ifstream in(out);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["prompts"], 2);
  const int64_t tokens = j["tokens"];
  ASSERT_EQ(j["expert_counts"].size(), 2u);
  for (const auto& layer : j["expert_counts"]) {
    ASSERT_EQ(layer.size(), 16u);
    // Every token picks exactly 2 experts in every layer.
    EXPECT_EQ(
        std::accumulate(layer.begin(), layer.end(), int64_t{0},
                        [](int64_t a, const nlohmann::json& c) { return a + c.get<int64_t>(); }),
        2 * tokens);
  }
  r = run_strata("plan -m " + model + " --profile " + out + " --gpu none --json", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("experts.json"), std::string::npos) << r.output;

  r = run_strata("profile -m " + model + " --prompts " + (dir / "missing.txt").string() + " -o " +
                 out);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("cannot read prompts file"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace strata
