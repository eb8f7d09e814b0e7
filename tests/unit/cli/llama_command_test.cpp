// `strata plan --llama-cmd '<a whole llama.cpp command line>'`: the line split as a shell splits
// it, the program name dropped, llama.cpp's spellings renamed, flags plan does not know left out
// and named; end to end, the pasted command's placement is priced next to strata's plan.

#include "cli/llama_command.h"

#include <gtest/gtest.h>

#include "support/test_support.h"
#include "unit/cli/cli_test_support.h"
#include "util/error.h"

namespace strata::cli {
namespace {

using Words = std::vector<std::string>;

TEST(LlamaCommand, WordsSplitAsAShellSplitsThem) {
  EXPECT_EQ(shell_words("llama-server  -m a.gguf\t-c 4096"),
            (Words{"llama-server", "-m", "a.gguf", "-c", "4096"}));
  // A regex in single quotes, a path with a space in double quotes, an escaped space.
  EXPECT_EQ(
      shell_words(R"(-ot 'blk\.(1[0-9])\.ffn_.*_exps=CPU' -m "my models/a.gguf" -a b\ c)"),
      (Words{"-ot", R"(blk\.(1[0-9])\.ffn_.*_exps=CPU)", "-m", "my models/a.gguf", "-a", "b c"}));
  EXPECT_EQ(shell_words("x \"say \\\"hi\\\" \\\\ \\n\""), (Words{"x", "say \"hi\" \\ \\n"}));
  // Lines continued with a backslash, as guides print long commands.
  EXPECT_EQ(shell_words("llama-server \\\n  -ngl 99 \\\n  -c 8192"),
            (Words{"llama-server", "-ngl", "99", "-c", "8192"}));
  EXPECT_TRUE(shell_words("   ").empty());
  EXPECT_THROW(shell_words("-ot 'blk"), Error);
  EXPECT_THROW(shell_words("-m \"a"), Error);
}

TEST(LlamaCommand, ThePastedFlagsReplaceItAndUnknownOnesAreNamed) {
  const auto known = [](const std::string& name) {
    return name == "-m" || name == "--gpu-layers" || name == "--n-cpu-moe" || name == "--ctx" ||
           name == "--kv-type" || name == "--gpu";
  };
  const Words args = {"plan", "--gpu", "8G:448", "--llama-cmd",
                      "./build/bin/llama-server -m a.gguf -ngl 99 --n-cpu-moe 30 -c 32768 "
                      "-fa on --spec-type ngram-simple --verbose -ctk q8_0"};
  const RewrittenArgs r = expand_llama_command(args, known);
  EXPECT_EQ(r.args, (Words{"plan", "--gpu", "8G:448", "-m", "a.gguf", "--gpu-layers", "99",
                           "--n-cpu-moe", "30", "--ctx", "32768", "--kv-type", "q8_0"}));
  std::string notes;
  for (const auto& n : r.notes) notes += n + "\n";
  EXPECT_NE(notes.find("-fa on: accepted for llama.cpp's sake"), std::string::npos) << notes;
  EXPECT_NE(notes.find("--spec-type ngram-simple: not a flag strata plan knows"), std::string::npos)
      << notes;
  EXPECT_NE(notes.find("--verbose: not a flag strata plan knows"), std::string::npos) << notes;
  // The = form, and a line that is only flags (no program name).
  EXPECT_EQ(expand_llama_command(Words{"plan", "--llama-cmd=-m b.gguf -c 512"}, known).args,
            (Words{"plan", "-m", "b.gguf", "--ctx", "512"}));
  // With --arch the command's model file is not read: its -m is left out, and said.
  const RewrittenArgs arch = expand_llama_command(
      Words{"plan", "--arch", "qwen3-30b-a3b", "--llama-cmd", "llama-cli -m c.gguf -ngl 99"},
      known);
  EXPECT_EQ(arch.args, (Words{"plan", "--arch", "qwen3-30b-a3b", "--gpu-layers", "99"}));
  ASSERT_FALSE(arch.notes.empty());
  EXPECT_NE(arch.notes[0].find("-m c.gguf: left out; --arch plans the published architecture"),
            std::string::npos)
      << arch.notes[0];
  EXPECT_THROW(expand_llama_command(Words{"plan", "--llama-cmd"}, known), Error);
  EXPECT_THROW(expand_llama_command(Words{"plan", "--llama-cmd", " "}, known), Error);
}

TEST(LlamaCommand, PlanPricesThePastedCommand) {
  const std::string model = (test::oracle_dir() / "models" / "tiny-qwen3moe-Q8_0.gguf").string();
  const auto r =
      run_strata("plan --gpu 8G:448 --ram 32G:50 --cores 6 --llama-cmd \"llama-server -m '" +
                 model + "' -ngl 99 --n-cpu-moe 1 -c 4096 -fa on --foo bar\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "The given placement: 1 layers with experts in RAM")) << r.output;
  EXPECT_TRUE(contains(r.output, "--foo bar: not a flag strata plan knows")) << r.output;
  EXPECT_TRUE(contains(r.output, "strata's plan: decode")) << r.output;
}

}  // namespace
}  // namespace strata::cli
