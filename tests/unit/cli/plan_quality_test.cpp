// `strata plan --quality`: each file's measured quality (strata perplexity --kld --json) next to
// its predicted speed on the same (here hypothetical) machine.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "unit/cli/cli_test_support.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

TEST(PlanQuality, MeasuredQualityStandsNextToPredictedSpeed) {
  const std::string model =
      (test::test_data_dir() / ".." / ".." / "tools" / "train" / "strata-coder-tiny.gguf").string();
  const std::string text = (test::test_data_dir() / "perplexity-text.txt").string();
  const fs::path dir = test::temp_dir() / "plan-quality";
  fs::create_directories(dir);
  const std::string q4 = (dir / "tiny-Q4_0.gguf").string(), base = (dir / "base.stkl").string();
  ASSERT_EQ(run_strata("quantize " + model + " " + q4 + " Q4_0 --allow-requantize").exit_code, 0);
  const auto measure = [&](const std::string& file, const std::string& flags, const fs::path& out) {
    auto r = run_strata("perplexity -m " + file + " -f " + text + " --ctx 128 --chunks 4 " +
                            "--device none --json " + flags,
                        false);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::ofstream(out) << r.output;
  };
  measure(model, "--save-top 4096 --save-logits " + base, dir / "q8.json");
  measure(model, "--kld " + base, dir / "q8-self.json");
  measure(q4, "--kld " + base, dir / "q4.json");
  const std::string machine = " --gpu none --ram 32G:50 --cores 4 --ctx 2048 ";
  auto r =
      run_strata("plan -m " + model + machine + "--json --quality " +
                     (dir / "q8-self.json").string() + " --quality " + (dir / "q4.json").string(),
                 false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json rows = nlohmann::json::parse(r.output)["quality"];
  ASSERT_EQ(rows.size(), 2u);
  std::ifstream q4_in(dir / "q4.json");
  const nlohmann::json measured = nlohmann::json::parse(q4_in);
  EXPECT_EQ(rows[0]["kld_mean"], 0.0);
  EXPECT_EQ(rows[1]["model"], q4);
  EXPECT_EQ(rows[1]["ppl"], measured["ppl"]);
  EXPECT_EQ(rows[1]["kld_mean"], measured["kld"]["mean"]);
  EXPECT_GT(rows[1]["kld_mean"].get<double>(), 0.01);
  EXPECT_LT(rows[1]["bytes"].get<double>(), rows[0]["bytes"].get<double>());
  for (const auto& row : rows) {
    EXPECT_TRUE(row["fits"].get<bool>());
    EXPECT_GT(row["decode_tps"].get<double>(), 0.0);
  }
  // The text report has the table; a file that is not a measurement is refused.
  r = run_strata("plan -m " + model + machine + "--quality " + (dir / "q4.json").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "tiny-Q4_0.gguf")) << r.output;
  std::ofstream(dir / "other.json") << R"({"tokens": 3})";
  r = run_strata("plan -m " + model + machine + "--quality " + (dir / "other.json").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "not what `strata perplexity --json` prints")) << r.output;
}

}  // namespace
}  // namespace strata
