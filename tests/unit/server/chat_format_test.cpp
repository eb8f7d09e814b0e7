// The chat formats: recognized from the template, the tokens that end a turn and the tags the
// parsers read, messages adapted for the template, and the grammars of enforced tool calls and
// JSON answers in the GLM and harmony formats (accepted, parsed back, refused when wrong).

#include "server/chat_format.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "grammar/grammar_matcher.h"
#include "parse_in_pieces.h"
#include "server/output_grammar.h"
#include "server/tool_calls.h"

namespace strata::server {
namespace {

using test_support::parse_whole;
using Json = nlohmann::ordered_json;

// A vocabulary of the given tokens (ids in order); end-of-generation as from_gguf would list it.
Vocab vocab_of(const std::vector<std::pair<std::string, TokenType>>& tokens,
               const std::vector<std::string>& end_of_generation) {
  Vocab v;
  for (const auto& [text, type] : tokens) {
    v.token_to_id[text] = v.size();
    v.tokens.push_back(text);
    v.types.push_back(type);
  }
  for (const std::string& t : end_of_generation) v.end_of_generation.push_back(*v.find(t));
  std::sort(v.end_of_generation.begin(), v.end_of_generation.end());
  return v;
}

std::vector<std::string> texts(const Vocab& v, const std::vector<int32_t>& ids) {
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(v.tokens[static_cast<size_t>(id)]);
  std::sort(out.begin(), out.end());
  return out;
}

constexpr TokenType kControl = TokenType::control;

TEST(ChatFormat, StyleComesFromTheTemplate) {
  EXPECT_EQ(tool_call_style("{{- '<|start|>assistant<|channel|>final<|message|>' }}"),
            ToolCallStyle::harmony);
  EXPECT_EQ(tool_call_style("{{ '<tool_call>' + name }}<arg_key>{{ k }}</arg_key>"),
            ToolCallStyle::glm);
  EXPECT_EQ(tool_call_style("{{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}"),
            ToolCallStyle::xml);
  EXPECT_EQ(tool_call_style("{{- '<tool_call>\\n{\"name\": \"' }}"), ToolCallStyle::json);
  EXPECT_EQ(tool_call_style("<|im_start|>"), ToolCallStyle::json);
}

// harmony: <|end|> closes one message and the turn goes on; <|return|> and <|call|> end it.
TEST(ChatFormat, HarmonyTurnsEndOnReturnAndCall) {
  const Vocab v = vocab_of({{"hello", TokenType::normal},
                            {"<|endoftext|>", kControl},
                            {"<|return|>", kControl},
                            {"<|constrain|>", kControl},
                            {"<|channel|>", kControl},
                            {"<|start|>", kControl},
                            {"<|end|>", kControl},
                            {"<|message|>", kControl},
                            {"<|call|>", kControl}},
                           {"<|endoftext|>", "<|return|>", "<|end|>", "<|call|>"});
  EXPECT_EQ(texts(v, end_of_turn_tokens(ToolCallStyle::harmony, v)),
            (std::vector<std::string>{"<|call|>", "<|endoftext|>", "<|return|>"}));
  EXPECT_EQ(texts(v, end_of_turn_tokens(ToolCallStyle::json, v)),
            (std::vector<std::string>{"<|call|>", "<|endoftext|>", "<|end|>", "<|return|>"}))
      << "other formats keep the vocabulary's list";
  EXPECT_EQ(texts(v, format_tag_tokens(ToolCallStyle::harmony, v)),
            (std::vector<std::string>{"<|call|>", "<|channel|>", "<|constrain|>", "<|end|>",
                                      "<|message|>", "<|return|>", "<|start|>"}));
  const std::vector<int32_t> tags = format_tag_tokens(ToolCallStyle::harmony, v);
  EXPECT_TRUE(std::is_sorted(tags.begin(), tags.end())) << "(looked up by binary search)";
}

// GLM: the model ends its turn by opening the next one (the user's, or a tool result's).
TEST(ChatFormat, GlmTurnsEndOnUserAndObservation) {
  const Vocab v = vocab_of({{"<|endoftext|>", kControl},
                            {"<|user|>", kControl},
                            {"<|assistant|>", kControl},
                            {"<|observation|>", kControl},
                            {"<think>", kControl},
                            {"</think>", kControl},
                            {"<tool_call>", kControl},
                            {"</tool_call>", kControl},
                            {"<arg_key>", kControl},
                            {"</arg_key>", kControl},
                            {"<arg_value>", kControl},
                            {"</arg_value>", TokenType::user_defined},
                            {"<tool_response>", kControl}},
                           {"<|endoftext|>"});
  EXPECT_EQ(texts(v, end_of_turn_tokens(ToolCallStyle::glm, v)),
            (std::vector<std::string>{"<|endoftext|>", "<|observation|>", "<|user|>"}));
  EXPECT_EQ(texts(v, format_tag_tokens(ToolCallStyle::glm, v)),
            (std::vector<std::string>{"</arg_key>", "</arg_value>", "</think>", "</tool_call>",
                                      "<arg_key>", "<arg_value>", "<think>", "<tool_call>"}));
  EXPECT_EQ(texts(v, format_tag_tokens(ToolCallStyle::json, v)),
            (std::vector<std::string>{"</think>", "</tool_call>", "<think>", "<tool_call>"}));
}

TEST(ChatFormat, HarmonyMessagesCarryReasoningAsThinking) {
  Json messages = Json::parse(R"([
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": "", "reasoning_content": "Use the tool.",
     "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": {}}}]},
    {"role": "assistant", "content": "Checking.", "reasoning_content": "Hm.",
     "tool_calls": [{"id": "d", "type": "function", "function": {"name": "f", "arguments": {}}}]},
    {"role": "assistant", "content": "Sunny.", "reasoning_content": "Easy."}])");
  Json glm = messages;
  adapt_messages(ToolCallStyle::glm, glm);
  EXPECT_EQ(glm, messages) << "only harmony templates read `thinking`";
  adapt_messages(ToolCallStyle::harmony, messages);
  EXPECT_EQ(messages[1]["thinking"], "Use the tool.");
  EXPECT_FALSE(messages[2].contains("thinking")) << "the template refuses both with tool calls";
  EXPECT_EQ(messages[3]["thinking"], "Easy.");
  EXPECT_FALSE(messages[0].contains("thinking"));
}

TEST(ChatFormat, HarmonyOpenMessage) {
  EXPECT_EQ(harmony_open_message("<|start|>user<|message|>Hi<|end|><|start|>assistant"),
            "assistant");
  EXPECT_EQ(harmony_open_message("<|start|>assistant<|channel|>final<|message|>Hel"),
            "assistant<|channel|>final<|message|>Hel");
  EXPECT_EQ(harmony_open_message("<|start|>user<|message|>Hi<|end|>"), "");
  EXPECT_EQ(harmony_open_message("no markup"), "");
}

GenerationRequest request_with_tools(bool parallel) {
  GenerationRequest r;
  r.tools = Json::parse(R"([{"type": "function", "function": {"name": "edit_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "line": {"type": "integer"},
    "dry_run": {"type": "boolean"}}, "required": ["path", "line"]}}}])");
  r.tool_choice = "required";
  r.parallel_tool_calls = parallel;
  return r;
}

// The text as the model writes it, with the given tags as special tokens.
std::string with_special(std::string text, const std::vector<std::string>& tags) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    bool tagged = false;
    for (const std::string& tag : tags) {
      if (text.compare(i, tag.size(), tag) == 0) {
        out += kSpecialTokenMark + tag;
        i += tag.size();
        tagged = true;
        break;
      }
    }
    if (!tagged) out += text[i++];
  }
  return out;
}

bool complete(const OutputGrammar& g, const std::string& text) {
  grammar::GrammarMatcher m(g.grammar);
  return m.accept(text) && m.can_end();
}

const std::vector<std::string> kGlmTags = {"<tool_call>", "</tool_call>", "<arg_key>",
                                           "</arg_key>",  "<arg_value>",  "</arg_value>"};
const std::vector<std::string> kHarmonyTags = {"<|channel|>", "<|message|>", "<|constrain|>",
                                               "<|start|>", "<|end|>"};

TEST(ChatFormat, GlmCallsAreEnforcedAndParsedBack) {
  const GenerationRequest r = request_with_tools(/*parallel=*/true);
  const auto g = output_grammar(r, ToolCallStyle::glm);
  ASSERT_TRUE(g);
  const std::string call =
      "<tool_call>edit_file\n<arg_key>path</arg_key>\n<arg_value>src/a <b>.c</arg_value>\n"
      "<arg_key>line</arg_key>\n<arg_value>42</arg_value>\n</tool_call>";
  EXPECT_TRUE(complete(*g, with_special(call, kGlmTags)));
  EXPECT_TRUE(complete(*g, call)) << "plain-text tags for vocabularies without the tokens";
  EXPECT_TRUE(complete(*g, with_special(call + "\n" + call, kGlmTags))) << "parallel calls";
  const ParsedDelta parsed =
      parse_whole(call, {.parse_tool_calls = true, .tools = r.tools, .style = ToolCallStyle::glm});
  ASSERT_EQ(parsed.tool_calls.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(parsed.tool_calls[0].arguments),
            nlohmann::json::parse(R"({"path": "src/a <b>.c", "line": 42})"));
  for (const std::string& bad : std::vector<std::string>{
           // a line that is no integer, a missing path, a closing tag inside a value, a call
           // to a tool not offered
           "<tool_call>edit_file\n<arg_key>path</arg_key>\n<arg_value>x</arg_value>\n"
           "<arg_key>line</arg_key>\n<arg_value>one</arg_value>\n</tool_call>",
           "<tool_call>edit_file\n<arg_key>line</arg_key>\n<arg_value>1</arg_value>\n"
           "</tool_call>",
           "<tool_call>edit_file\n<arg_key>path</arg_key>\n<arg_value>a</arg_value>b"
           "</arg_value>\n<arg_key>line</arg_key>\n<arg_value>1</arg_value>\n</tool_call>",
           "<tool_call>rm\n</tool_call>"})
    EXPECT_FALSE(complete(*g, with_special(bad, kGlmTags))) << bad;
}

TEST(ChatFormat, HarmonyCallsAreEnforcedAfterOptionalReasoning) {
  GenerationRequest r = request_with_tools(/*parallel=*/true);
  const auto g = output_grammar(r, ToolCallStyle::harmony);
  ASSERT_TRUE(g);
  const std::string call =
      "<|channel|>commentary to=functions.edit_file <|constrain|>json<|message|>"
      "{\"path\": \"a.c\", \"line\": 3}";
  const std::string reasoning =
      "<|channel|>analysis<|message|>The user wants line 3 <of> a.c.<|end|><|start|>assistant";
  EXPECT_TRUE(complete(*g, with_special(call, kHarmonyTags)));
  EXPECT_TRUE(complete(*g, with_special(reasoning + call, kHarmonyTags)));
  grammar::GrammarMatcher m(g->grammar);
  ASSERT_TRUE(m.accept(with_special(call, kHarmonyTags)));
  EXPECT_FALSE(m.accepts_more()) << "the turn ends at its call (<|call|>, an end token)";
  const ParsedDelta parsed =
      parse_whole(reasoning + call + "<|call|>",
                  {.parse_tool_calls = true, .tools = r.tools, .style = ToolCallStyle::harmony});
  EXPECT_EQ(parsed.reasoning, "The user wants line 3 <of> a.c.");
  ASSERT_EQ(parsed.tool_calls.size(), 1u);
  EXPECT_EQ(parsed.tool_calls[0].name, "edit_file");
  EXPECT_EQ(nlohmann::json::parse(parsed.tool_calls[0].arguments),
            nlohmann::json::parse(R"({"path": "a.c", "line": 3})"));
  for (const std::string& bad : std::vector<std::string>{
           "<|channel|>commentary to=functions.edit_file <|constrain|>json<|message|>"
           "{\"path\": \"a.c\"}",
           "<|channel|>commentary to=functions.rm <|constrain|>json<|message|>{}",
           "<|channel|>final<|message|>Done.",
           "<|channel|>analysis<|message|>a<|end|>b<|end|><|start|>assistant" + call})
    EXPECT_FALSE(complete(*g, with_special(bad, kHarmonyTags))) << bad;
}

TEST(ChatFormat, HarmonyJsonAnswersAreFinalMessages) {
  GenerationRequest r;
  r.response_format = "json_schema";
  r.json_schema = Json::parse(R"({"type": "array", "items": {"type": "integer"}, "maxItems": 2})");
  const auto g = output_grammar(r, ToolCallStyle::harmony);
  ASSERT_TRUE(g);
  EXPECT_TRUE(complete(*g, with_special("<|channel|>final<|message|>[1, 2]", kHarmonyTags)));
  EXPECT_TRUE(complete(*g, with_special("<|channel|>analysis<|message|>Two numbers.<|end|>"
                                        "<|start|>assistant<|channel|>final<|message|>[3]",
                                        kHarmonyTags)));
  EXPECT_FALSE(complete(*g, with_special("<|channel|>final<|message|>[1, 2, 3]", kHarmonyTags)));
  EXPECT_FALSE(complete(*g, "[1]")) << "the answer is a final message";
  // Tools with tool_choice auto: the final JSON or a call.
  GenerationRequest both = request_with_tools(true);
  both.tool_choice = "auto";
  both.response_format = "json_schema";
  both.json_schema = r.json_schema;
  const auto g2 = output_grammar(both, ToolCallStyle::harmony);
  EXPECT_TRUE(complete(*g2, with_special("<|channel|>final<|message|>[7]", kHarmonyTags)));
  EXPECT_TRUE(complete(*g2, with_special("<|channel|>commentary to=functions.edit_file "
                                         "<|constrain|>json<|message|>{\"path\": \"a\", "
                                         "\"line\": 1}",
                                         kHarmonyTags)));
}

}  // namespace
}  // namespace strata::server
