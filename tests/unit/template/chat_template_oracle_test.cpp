// The Qwen3 chat template stored in ../shared/oracle/tokenizer/qwen3-vocab.gguf, rendered for
// every case of ../shared/oracle/chat/qwen3-cases.json, equals the reference rendering
// (Hugging Face transformers' jinja2 environment) in qwen3-rendered.json byte for byte.

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "gguf/gguf_file.h"
#include "support/test_support.h"
#include "template/chat_template.h"

namespace strata {
namespace {

nlohmann::ordered_json read_json(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << p;
  return nlohmann::ordered_json::parse(in);
}

// Shows where two renderings first differ, with a little context.
std::string first_difference(const std::string& got, const std::string& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  const size_t from = i > 40 ? i - 40 : 0;
  return "first difference at byte " + std::to_string(i) +
         "\n  got:  " + nlohmann::json(got.substr(from, 80)).dump() +
         "\n  want: " + nlohmann::json(want.substr(from, 80)).dump();
}

TEST(ChatTemplateOracle, Qwen3TemplateMatchesReferenceOnAllCases) {
  const auto dir = test::oracle_dir();
  const GgufFile file = GgufFile::open((dir / "tokenizer" / "qwen3-vocab.gguf").string());
  const ChatTemplate chat_template(file.get_string("tokenizer.chat_template"));
  const auto cases = read_json(dir / "chat" / "qwen3-cases.json");
  const auto rendered = read_json(dir / "chat" / "qwen3-rendered.json");
  ASSERT_TRUE(cases.is_array());
  ASSERT_EQ(cases.size(), 8u);
  ASSERT_EQ(rendered.size(), cases.size());

  int matched = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const auto& want = rendered[i];
    ASSERT_EQ(c.at("name"), want.at("name")) << "case " << i << " is out of order";
    ChatTemplateInputs inputs;
    inputs.messages = c.at("messages");
    if (c.contains("tools")) inputs.tools = c.at("tools");
    if (c.contains("add_generation_prompt"))
      inputs.add_generation_prompt = c.at("add_generation_prompt");
    if (c.contains("enable_thinking")) inputs.enable_thinking = c.at("enable_thinking").get<bool>();
    const std::string got = chat_template.render(inputs);
    const std::string expected = want.at("rendered").get<std::string>();
    EXPECT_EQ(got, expected) << "case '" << c.at("name").get<std::string>()
                             << "': " << first_difference(got, expected);
    if (got == expected) ++matched;
  }
  EXPECT_EQ(matched, 8);
}

// The same template after normalize_messages: OpenAI content parts and JSON-string arguments
// render exactly like the plain forms.
TEST(ChatTemplateOracle, NormalizedOpenAiFormsRenderLikePlainForms) {
  const auto dir = test::oracle_dir();
  const GgufFile file = GgufFile::open((dir / "tokenizer" / "qwen3-vocab.gguf").string());
  const ChatTemplate chat_template(file.get_string("tokenizer.chat_template"));
  const auto cases = read_json(dir / "chat" / "qwen3-cases.json");
  const auto rendered = read_json(dir / "chat" / "qwen3-rendered.json");
  for (size_t i = 0; i < cases.size(); ++i) {
    auto messages = cases[i].at("messages");
    for (auto& m : messages) {
      if (m.at("content").is_string()) {
        m["content"] = nlohmann::ordered_json::array(
            {{{"type", "text"}, {"text", m.at("content").get<std::string>()}}});
      }
      if (m.contains("tool_calls")) {
        for (auto& call : m["tool_calls"]) {
          call["function"]["arguments"] = call["function"]["arguments"].dump();
        }
      }
    }
    ChatTemplateInputs inputs;
    inputs.messages = normalize_messages(messages);
    if (cases[i].contains("tools")) inputs.tools = cases[i].at("tools");
    if (cases[i].contains("add_generation_prompt")) {
      inputs.add_generation_prompt = cases[i].at("add_generation_prompt");
    }
    if (cases[i].contains("enable_thinking")) {
      inputs.enable_thinking = cases[i].at("enable_thinking").get<bool>();
    }
    EXPECT_EQ(chat_template.render(inputs), rendered[i].at("rendered").get<std::string>())
        << cases[i].at("name");
  }
}

}  // namespace
}  // namespace strata
