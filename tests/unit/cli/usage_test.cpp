// The command line's usage paths: `strata help [CMD]`, a mistyped command answered with the
// nearest one, and the documented exit codes (0 success, 1 a user error, 2 a usage error).

#include <gtest/gtest.h>

#include "support/test_support.h"
#include "unit/cli/cli_test_support.h"

namespace strata {
namespace {

TEST(Usage, HelpListsTheCommandsAndHelpCmdShowsItsOptions) {
  auto r = run_strata("help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "serve")) << r.output;
  EXPECT_TRUE(contains(r.output, "Exit codes: 0 success, 1 a user error, 2 a usage error"))
      << r.output;
  r = run_strata("help serve");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "--parallel")) << r.output;
  r = run_strata("");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "serve")) << r.output;
}

TEST(Usage, MistypedCommandSuggestsTheNearest) {
  auto r = run_strata("serv -m x.gguf");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "unknown command 'serv'; did you mean 'serve'?")) << r.output;
  r = run_strata("bnech");
  EXPECT_TRUE(contains(r.output, "did you mean 'bench'?")) << r.output;
  r = run_strata("frobnicate");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "unknown command 'frobnicate' (commands: inspect")) << r.output;
}

TEST(Usage, UsageErrorsExitTwoAndUserErrorsOne) {
  auto r = run_strata("run -m x.gguf --no-such-flag 1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = run_strata("run -m x.gguf -p hi -ctk q8_0 -ctv f16");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "strata keeps keys and values in one type")) << r.output;
  r = run_strata("inspect /no/such/model.gguf");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const std::string model = (test::oracle_dir() / "models" / "tiny-qwen3moe-Q8_0.gguf").string();
  r = run_strata("run -m " + model + " --tokens 1,2 -n 2 --device cpu");  // a synonym of none
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run_strata("--version");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// The model file as -m FILE or as the first argument, in every command that reads one.
TEST(Usage, ModelIsDashMOrPositionalEverywhere) {
  const std::string model = (test::oracle_dir() / "models" / "tiny-qwen3moe-Q8_0.gguf").string();
  for (const std::string& form : {"-m " + model, model}) {
    auto r = run_strata("run " + form + " --tokens 1,2 -n 2 --device none");
    EXPECT_EQ(r.exit_code, 0) << form << "\n" << r.output;
    r = run_strata("inspect " + form);
    EXPECT_EQ(r.exit_code, 0) << form << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, "27 tensors")) << r.output;
  }
}

}  // namespace
}  // namespace strata
