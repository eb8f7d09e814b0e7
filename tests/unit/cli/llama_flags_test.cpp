// llama.cpp's command lines, as users paste them: every line of the corpus
// (tests/data/llama_command_lines.txt, from the field cases and public guides) becomes the strata
// command line it names, with a note per flag that has no meaning here; the real binary then runs
// the field's C2 command line through `strata plan` and prices what it says.

#include "cli/llama_flags.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/test_support.h"
#include "unit/cli/cli_test_support.h"
#include "util/error.h"

namespace strata::cli {
namespace {

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

struct CorpusCase {
  int line = 0;
  std::vector<std::string> llama, strata;
  size_t notes = 0;
};

std::vector<CorpusCase> corpus() {
  std::ifstream in(test::test_data_dir() / "llama_command_lines.txt");
  std::vector<CorpusCase> out;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.rfind("llama:", 0) == 0) {
      out.push_back({number, words(line.substr(6)), {}, 0});
    } else if (line.rfind("strata:", 0) == 0) {
      out.back().strata = words(line.substr(7));
    } else if (line.rfind("notes ", 0) == 0) {
      out.back().notes = static_cast<size_t>(std::stoul(line.substr(6)));
    }
  }
  return out;
}

TEST(LlamaFlags, EveryCorpusLineBecomesItsStrataCommand) {
  const std::vector<CorpusCase> cases = corpus();
  ASSERT_GE(cases.size(), 12u);
  for (const CorpusCase& c : cases) {
    const RewrittenArgs r = rewrite_llama_flags(c.llama);
    EXPECT_EQ(r.args, c.strata) << "corpus line " << c.line;
    EXPECT_EQ(r.notes.size(), c.notes)
        << "corpus line " << c.line << ": " << fmt::format("{}", fmt::join(r.notes, " | "));
  }
}

TEST(LlamaFlags, NotesSayWhatWasAcceptedAndWhy) {
  const std::vector<std::string> args = {"serve", "-m", "x.gguf", "-fa", "on", "--jinja"};
  const RewrittenArgs r = rewrite_llama_flags(args);
  ASSERT_EQ(r.notes.size(), 2u);
  EXPECT_NE(r.notes[0].find("-fa on: accepted for llama.cpp's sake; strata's attention"),
            std::string::npos)
      << r.notes[0];
  EXPECT_NE(r.notes[1].find("--jinja: accepted for llama.cpp's sake; strata always applies"),
            std::string::npos)
      << r.notes[1];
}

TEST(LlamaFlags, DifferentKeyAndValueTypesAreRefused) {
  const std::vector<std::string> args = {"run", "-m", "x.gguf", "-ctk", "q8_0", "-ctv", "f16"};
  try {
    rewrite_llama_flags(args);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("-ctv f16 with keys in q8_0: strata keeps keys and "
                                         "values in one type"),
              std::string::npos)
        << e.what();
  }
}

TEST(LlamaFlags, OtherCommandsAndMissingValuesAreLeftToTheParser) {
  const std::vector<std::string> inspect = {"inspect", "x.gguf", "-c", "1"};
  EXPECT_EQ(rewrite_llama_flags(inspect).args, inspect);
  const std::vector<std::string> dangling = {"run", "-m", "x.gguf", "-ngl"};
  EXPECT_THROW(rewrite_llama_flags(dangling), Error);
}

// FIELD C2's llama-server flags pasted into `strata plan`: parsed, priced, with a note per flag
// strata has no use for (before, CLI11 refused them all).
TEST(LlamaFlags, FieldCaseC2PastedIntoPlan) {
  const auto r = run_strata(
      "plan --arch qwen3-coder-30b-a3b --quant-size 18.56GB --gpu 7.6G:448 --ram 32G:29.1 "
      "--cores 6 -ngl 99 -ncmoe 32 -fa on -t 6 -c 36864 -ctk q8_0 -ctv q8_0 --temp 0.7 "
      "--top-p 0.8 --top-k 20 --repeat-penalty 1.05 --min-p 0.0 --json",
      false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["given"]["cpu_expert_layers"], 32) << r.output.substr(0, 400);
  const std::string text =
      run_strata(
          "plan --arch qwen3-coder-30b-a3b --quant-size 18.56GB --gpu 7.6G:448 "
          "--ram 32G:29.1 --cores 6 -ngl 99 -fa on -c 36864 -ctk q8_0")
          .output;
  EXPECT_NE(text.find("note: -fa on: accepted for llama.cpp's sake"), std::string::npos) << text;
  EXPECT_NE(text.find("Goal: context 36864 tokens, KV cache q8_0"), std::string::npos) << text;
}

// A llama.cpp GPU command on a machine whose only Vulkan device is a CPU (never picked by
// --device auto) runs on the CPU with a warning, as llama.cpp's CPU build would; the generated
// line ends before the timing line.
TEST(LlamaFlags, PastedGpuFlagsRunOnTheCpuWithoutAGpu) {
  const std::string model = (test::oracle_dir() / "models" / "tiny-qwen3moe-Q8_0.gguf").string();
  const auto r = run_strata_env(lavapipe_only(),
                                "run -m " + model + " --tokens 1,2,3 -n 3 -ngl 99 -ncmoe 1 -fa on");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("no usable GPU: the placement flags"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\nprompt: 3 tokens"), std::string::npos) << r.output;
}

// The "llama.cpp equivalent" plan prints parses as a strata command line too.
TEST(LlamaFlags, ThePlansLlamaCppEquivalentIsAccepted) {
  const std::string base =
      "plan --arch qwen3-coder-30b-a3b --quant-size 18.56GB --gpu 7.6G:448 --ram 32G:29.1 "
      "--cores 6 --ctx 36864 --kv-type q8_0";
  auto r = run_strata(base + " --json", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string flags = nlohmann::json::parse(r.output)["llama_cpp"]["flags"];
  EXPECT_NE(flags.find("-ctk q8_0"), std::string::npos) << flags;
  r = run_strata(
      "plan --arch qwen3-coder-30b-a3b --quant-size 18.56GB --gpu 7.6G:448 --ram 32G:29.1 "
      "--cores 6 " +
      flags + " --json");
  ASSERT_EQ(r.exit_code, 0) << flags << "\n" << r.output;
}

}  // namespace
}  // namespace strata::cli
