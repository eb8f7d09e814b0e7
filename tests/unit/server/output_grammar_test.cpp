// The grammars of enforced tool calls accept what the chat templates write (Qwen3 JSON and
// Qwen3-Coder XML, special tokens as the vocabulary trie spells them), the tool-call parser reads
// that text back, and what breaks the tool's schema is refused.

#include "server/output_grammar.h"

#include <gtest/gtest.h>

#include <vector>

#include "grammar/grammar_matcher.h"
#include "server/api_error.h"
#include "server/tool_calls.h"

namespace strata::server {
namespace {

using Json = nlohmann::ordered_json;

GenerationRequest request_with_tools(bool parallel) {
  GenerationRequest r;
  r.tools = Json::parse(R"([{"type": "function", "function": {"name": "edit_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "line": {"type": "integer"},
    "dry_run": {"type": "boolean"}}, "required": ["path", "line"]}}}])");
  r.tool_choice = "required";
  r.parallel_tool_calls = parallel;
  return r;
}

// The text as the model writes it, with <tool_call> tags as special tokens.
std::string with_special_tags(std::string text) {
  for (const std::string tag : {"</tool_call>", "<tool_call>"}) {
    for (size_t at = text.find(tag); at != std::string::npos; at = text.find(tag, at + 2)) {
      if (at > 0 && text[at - 1] == kSpecialTokenMark) continue;
      text.insert(at, 1, kSpecialTokenMark);
    }
  }
  return text;
}

bool complete(const OutputGrammar& g, const std::string& text) {
  grammar::GrammarMatcher m(g.grammar);
  return m.accept(text) && m.can_end();
}

TEST(OutputGrammar, StyleComesFromTheTemplate) {
  EXPECT_EQ(tool_call_style("{{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}"),
            ToolCallStyle::xml);
  EXPECT_EQ(tool_call_style("{{- '<tool_call>\\n{\"name\": \"' }}"), ToolCallStyle::json);
}

TEST(OutputGrammar, Qwen3JsonCallsAreAcceptedAndParsedBack) {
  const auto g = output_grammar(request_with_tools(/*parallel=*/true), ToolCallStyle::json);
  ASSERT_TRUE(g);
  const std::string call =
      "<tool_call>\n{\"name\": \"edit_file\", \"arguments\": {\"path\": \"a.c\", \"line\": 3}}\n"
      "</tool_call>";
  EXPECT_TRUE(complete(*g, with_special_tags(call)));
  EXPECT_TRUE(complete(*g, call)) << "plain-text tags for vocabularies without the tokens";
  EXPECT_TRUE(complete(*g, with_special_tags(call + "\n" + call))) << "parallel calls";
  const auto parsed = parse_tool_call(call.substr(11, call.size() - 11 - 12), Json());
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->name, "edit_file");
  EXPECT_EQ(nlohmann::json::parse(parsed->arguments),
            nlohmann::json::parse(R"({"path": "a.c", "line": 3})"));
  // Missing a required argument, a wrong type, an unknown tool, text before the call.
  for (const std::string& bad : std::vector<std::string>{
           "<tool_call>\n{\"name\": \"edit_file\", \"arguments\": {\"path\": "
           "\"a.c\"}}\n</tool_call>",
           "<tool_call>\n{\"name\": \"edit_file\", \"arguments\": {\"path\": 1, \"line\": "
           "3}}\n</tool_call>",
           "<tool_call>\n{\"name\": \"rm\", \"arguments\": {}}\n</tool_call>", "Sure! " + call})
    EXPECT_FALSE(complete(*g, with_special_tags(bad))) << bad;
  // A special token cannot hide inside a string argument.
  EXPECT_FALSE(complete(*g, with_special_tags("<tool_call>\n{\"name\": \"edit_file\", "
                                              "\"arguments\": {\"path\": \"<tool_call>\", "
                                              "\"line\": 3}}\n</tool_call>")));
}

TEST(OutputGrammar, OneCallWithoutParallelToolCalls) {
  const auto g = output_grammar(request_with_tools(/*parallel=*/false), ToolCallStyle::json);
  const std::string call =
      "<tool_call>\n{\"name\": \"edit_file\", \"arguments\": {\"path\": \"a\", \"line\": 1}}\n"
      "</tool_call>";
  EXPECT_TRUE(complete(*g, call));
  grammar::GrammarMatcher m(g->grammar);
  ASSERT_TRUE(m.accept(call));
  EXPECT_FALSE(m.accepts_more()) << "nothing may follow the one call";
}

TEST(OutputGrammar, Qwen3CoderXmlCallsAreAcceptedAndParsedBack) {
  GenerationRequest r = request_with_tools(/*parallel=*/true);
  const auto g = output_grammar(r, ToolCallStyle::xml);
  ASSERT_TRUE(g);
  const std::string body =
      "<function=edit_file>\n<parameter=path>\nsrc/a <b>.c\n</parameter>\n"
      "<parameter=line>\n42\n</parameter>\n</function>\n";
  EXPECT_TRUE(complete(*g, with_special_tags("<tool_call>\n" + body + "</tool_call>")));
  const auto parsed = parse_tool_call(body, r.tools);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(nlohmann::json::parse(parsed->arguments),
            nlohmann::json::parse(R"({"path": "src/a <b>.c", "line": 42})"));
  // The optional dry_run may come last; a non-integer line, a missing path, a closing tag
  // inside a value are refused.
  EXPECT_TRUE(
      complete(*g, with_special_tags("<tool_call>\n<function=edit_file>\n<parameter=path>\n"
                                     "x\n</parameter>\n<parameter=line>\n1\n</parameter>\n"
                                     "<parameter=dry_run>\ntrue\n</parameter>\n</function>\n"
                                     "</tool_call>")));
  for (const std::string& bad : std::vector<std::string>{
           "<tool_call>\n<function=edit_file>\n<parameter=path>\nx\n</"
           "parameter>\n<parameter=line>\n"
           "one\n</parameter>\n</function>\n</tool_call>",
           "<tool_call>\n<function=edit_file>\n<parameter=line>\n1\n</parameter>\n</function>\n"
           "</tool_call>",
           "<tool_call>\n<function=edit_file>\n<parameter=path>\na</parameter>b\n</parameter>\n"
           "<parameter=line>\n1\n</parameter>\n</function>\n</tool_call>"})
    EXPECT_FALSE(complete(*g, with_special_tags(bad))) << bad;
}

TEST(OutputGrammar, ResponseFormatsAndTheirUnionWithAutoTools) {
  GenerationRequest r;
  EXPECT_FALSE(output_grammar(r, ToolCallStyle::json)) << "text: free";
  r.response_format = "json_object";
  auto g = output_grammar(r, ToolCallStyle::json);
  ASSERT_TRUE(g);
  EXPECT_TRUE(complete(*g, " {\"any\": [1, {\"x\": null}]}\n"));
  EXPECT_FALSE(complete(*g, "[1]"));
  r.response_format = "json_schema";
  r.json_schema = Json::parse(R"({"type": "array", "items": {"type": "integer"}, "maxItems": 2})");
  g = output_grammar(r, ToolCallStyle::json);
  EXPECT_TRUE(complete(*g, "[1, 2]"));
  EXPECT_FALSE(complete(*g, "[1, 2, 3]"));
  // Tools with tool_choice auto: the JSON answer or a call.
  GenerationRequest both = request_with_tools(true);
  both.tool_choice = "auto";
  both.response_format = "json_schema";
  both.json_schema = r.json_schema;
  g = output_grammar(both, ToolCallStyle::json);
  EXPECT_TRUE(complete(*g, "[7]"));
  EXPECT_TRUE(complete(*g,
                       "<tool_call>\n{\"name\": \"edit_file\", \"arguments\": {\"path\": "
                       "\"a\", \"line\": 1}}\n</tool_call>"));
  // Required calls win over a response format.
  both.tool_choice = "required";
  EXPECT_FALSE(complete(*output_grammar(both, ToolCallStyle::json), "[7]"));
}

TEST(OutputGrammar, UnenforcedKeywordsAreListed) {
  GenerationRequest r;
  r.response_format = "json_schema";
  r.json_schema = Json::parse(R"({"type": "string", "format": "uri"})");
  const auto g = output_grammar(r, ToolCallStyle::json);
  ASSERT_TRUE(g);
  ASSERT_EQ(g->unenforced.size(), 1u);
  EXPECT_NE(g->unenforced[0].find("format"), std::string::npos) << g->unenforced[0];
}

}  // namespace
}  // namespace strata::server
