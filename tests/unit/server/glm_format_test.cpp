// GLM-4.5/4.6 output: <think> reasoning and <tool_call>NAME <arg_key>/<arg_value> calls, whole
// and in pieces cut at every byte; argument types from the request's tool schemas; the calls a
// model writes when it goes wrong.

#include <gtest/gtest.h>

#include "parse_in_pieces.h"
#include "server/tool_calls.h"

namespace strata::server {
namespace {

using test_support::expect_any_pieces_like_whole;
using test_support::parse_whole;
using Json = nlohmann::json;

const Json kTools = Json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}},
  {"type": "function", "function": {"name": "set_flags", "parameters": {"type": "object",
    "properties": {"enabled": {"type": "boolean"}, "label": {"type": "string"},
                   "code": {"type": "string"}}}}}])");

OutputParserOptions glm(bool tools = true) {
  return {.parse_tool_calls = tools, .tools = tools ? kTools : Json(), .style = ToolCallStyle::glm};
}

TEST(GlmFormat, ReasoningThenContent) {
  // The generation prompt ends with <|assistant|>: the answer opens with a newline.
  const ParsedDelta d = expect_any_pieces_like_whole(
      "\n<think>The user wants 2 + 2.</think>\nThe answer is 4.", glm(/*tools=*/false));
  EXPECT_EQ(d.reasoning, "The user wants 2 + 2.");
  EXPECT_EQ(d.content, "The answer is 4.");
  // Thinking off: the prompt ends with <think></think>.
  EXPECT_EQ(parse_whole("\nHello!", glm()).content, "Hello!");
}

TEST(GlmFormat, ToolCallsWithSchemaTypes) {
  const ParsedDelta d = expect_any_pieces_like_whole(
      "\n<think>Need the weather.</think>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n"
      "<arg_value>New York, NY</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n"
      "<arg_key>extra</arg_key>\n<arg_value>{\"a\": [1, \"x\"]}</arg_value>\n</tool_call>\n"
      "<tool_call>set_flags\n<arg_key>enabled</arg_key>\n<arg_value>true</arg_value>\n"
      "<arg_key>label</arg_key>\n<arg_value>007</arg_value>\n<arg_key>code</arg_key>\n"
      "<arg_value>if (a </b) {\n  \"x\";\n}</arg_value>\n</tool_call>",
      glm());
  EXPECT_EQ(d.reasoning, "Need the weather.");
  EXPECT_EQ(d.content, "");
  ASSERT_EQ(d.tool_calls.size(), 2u);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  // Declared string: the text; declared integer: JSON; undeclared: JSON when it parses.
  EXPECT_EQ(Json::parse(d.tool_calls[0].arguments),
            Json::parse(R"({"city": "New York, NY", "days": 3, "extra": {"a": [1, "x"]}})"));
  EXPECT_EQ(d.tool_calls[1].name, "set_flags");
  EXPECT_EQ(
      Json::parse(d.tool_calls[1].arguments),
      Json::parse(R"({"enabled": true, "label": "007", "code": "if (a </b) {\n  \"x\";\n}"})"));
  EXPECT_NE(d.tool_calls[0].id, d.tool_calls[1].id);
}

TEST(GlmFormat, CallsWithoutArgumentsAndUnicode) {
  const ParsedDelta bare = expect_any_pieces_like_whole("<tool_call>list_files</tool_call>", glm());
  ASSERT_EQ(bare.tool_calls.size(), 1u);
  EXPECT_EQ(bare.tool_calls[0].name, "list_files");
  EXPECT_EQ(bare.tool_calls[0].arguments, "{}");
  const ParsedDelta newline = expect_any_pieces_like_whole("<tool_call>ls\n</tool_call>", glm());
  ASSERT_EQ(newline.tool_calls.size(), 1u);
  EXPECT_EQ(newline.tool_calls[0].arguments, "{}");
  // A string value cut inside a character streams whole characters.
  const ParsedDelta unicode = expect_any_pieces_like_whole(
      "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Zürich 東京</arg_value>\n"
      "</tool_call>",
      glm());
  ASSERT_EQ(unicode.tool_calls.size(), 1u);
  EXPECT_EQ(Json::parse(unicode.tool_calls[0].arguments)["city"], "Zürich 東京");
}

// As the Qwen path: a body that is no call stays content; a call whose name came out stands,
// a value missing its </arg_value> running to the end of the call; cut short before its name
// is complete, neither a call nor text.
TEST(GlmFormat, MalformedCalls) {
  const ParsedDelta spaces =
      expect_any_pieces_like_whole("<tool_call>not a call</tool_call>", glm());
  EXPECT_TRUE(spaces.tool_calls.empty());
  EXPECT_EQ(spaces.content, "<tool_call>not a call</tool_call>");
  const ParsedDelta unclosed = expect_any_pieces_like_whole(
      "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris\n"
      "<arg_key>days</arg_key>\n<arg_value>2\n</tool_call>",
      glm());
  ASSERT_EQ(unclosed.tool_calls.size(), 1u);
  EXPECT_EQ(Json::parse(unclosed.tool_calls[0].arguments),
            Json({{"city", "Paris\n<arg_key>days</arg_key>\n<arg_value>2\n"}}));
  const ParsedDelta number = expect_any_pieces_like_whole(
      "<tool_call>get_weather\n<arg_key>days</arg_key>\n<arg_value>2\n</tool_call>", glm());
  ASSERT_EQ(number.tool_calls.size(), 1u);
  EXPECT_EQ(Json::parse(number.tool_calls[0].arguments), Json({{"days", 2}}));
  const ParsedDelta cut = expect_any_pieces_like_whole(
      "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Par", glm());
  ASSERT_EQ(cut.tool_calls.size(), 1u);
  EXPECT_EQ(Json::parse(cut.tool_calls[0].arguments), Json({{"city", "Par"}}));
  const ParsedDelta before_name = expect_any_pieces_like_whole("Hi<tool_call>get_wea", glm());
  EXPECT_TRUE(before_name.tool_calls.empty());
  EXPECT_EQ(before_name.content, "Hi");
  // Whole-body parsing (bodies that were not streamed) refuses what does not close.
  EXPECT_FALSE(
      parse_tool_call("f\n<arg_key>a</arg_key>\n<arg_value>1", kTools, ToolCallStyle::glm));
  EXPECT_FALSE(parse_tool_call("f\n<arg_key>a</arg_key>\n", kTools, ToolCallStyle::glm));
  EXPECT_TRUE(parse_tool_call("f\n<arg_key>a</arg_key><arg_value>1</arg_value>", kTools,
                              ToolCallStyle::glm));
  // Other styles do not read GLM bodies; GLM still reads Qwen3 JSON ones.
  EXPECT_FALSE(parse_tool_call("f\n<arg_key>a</arg_key><arg_value>1</arg_value>", kTools));
  EXPECT_EQ(parse_whole("<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>", glm())
                .tool_calls.size(),
            1u);
  // Without tools in the request the tags are text.
  EXPECT_EQ(parse_whole("<tool_call>f</tool_call>", glm(/*tools=*/false)).content,
            "<tool_call>f</tool_call>");
}

TEST(GlmFormat, ArgumentValues) {
  EXPECT_EQ(glm_argument_value("42", "string"), "42");
  EXPECT_EQ(glm_argument_value("42", "integer"), 42);
  EXPECT_EQ(glm_argument_value("42", ""), 42);
  EXPECT_EQ(glm_argument_value("not json", "integer"), "not json");
  EXPECT_EQ(glm_argument_value("[1, 2]", "array"), Json::array({1, 2}));
  EXPECT_TRUE(is_glm_function_name("mcp.server-x:do_it"));
  EXPECT_FALSE(is_glm_function_name("two words"));
  EXPECT_FALSE(is_glm_function_name(""));
  EXPECT_FALSE(is_glm_function_name("{\"name\""));
}

}  // namespace
}  // namespace strata::server
