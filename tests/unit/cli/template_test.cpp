// `strata template` end to end: renders the oracle chat cases as the reference does.

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_test_support.h"
#include "support/test_support.h"

namespace strata {
namespace {

TEST(TemplateCommand, RendersTheOracleCases) {
  std::ifstream in(test::oracle_dir() / "chat" / "qwen3-rendered.json");
  const auto cases = nlohmann::ordered_json::parse(in);
  const auto vocab = (test::oracle_dir() / "tokenizer" / "qwen3-vocab.gguf").string();
  int checked = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const auto dir = test::temp_dir();
    std::ofstream((dir / "messages.json").string()) << c["messages"].dump();
    std::string args = "template -m " + vocab + " --messages " + (dir / "messages.json").string();
    if (c.contains("tools")) {
      std::ofstream((dir / "tools.json").string()) << c["tools"].dump();
      args += " --tools " + (dir / "tools.json").string();
    }
    if (c.contains("add_generation_prompt") && !c["add_generation_prompt"].get<bool>()) {
      args += " --no-generation-prompt";
    }
    if (c.contains("enable_thinking") && !c["enable_thinking"].get<bool>())
      args += " --no-thinking";
    const auto r = run_strata(args, false);
    ASSERT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.output, c["rendered"].get<std::string>());
    ++checked;
  }
  EXPECT_EQ(checked, 8);
}

TEST(TemplateCommand, ClearErrors) {
  const auto vocab = (test::oracle_dir() / "tokenizer" / "qwen3-vocab.gguf").string();
  const auto bad = (test::temp_dir() / "bad.json").string();
  std::ofstream(bad) << "{not json";
  auto r = run_strata("template -m " + vocab + " --messages " + bad);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("is not valid JSON"), std::string::npos) << r.output;
  // A model without a template falls back to ChatML with a warning.
  const auto msgs = (test::temp_dir() / "m.json").string();
  std::ofstream(msgs) << R"([{"role":"user","content":"hi"}])";
  r = run_strata("template -m " + (test::oracle_dir() / "models" / "tiny-llama-F16.gguf").string() +
                 " --messages " + msgs);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("no chat template"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace strata
