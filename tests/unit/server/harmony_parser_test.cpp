// gpt-oss output (harmony channels) into reasoning_content, content and tool_calls, whole and in
// pieces cut at every byte; the messages a model writes when it goes wrong.

#include "server/harmony_parser.h"

#include <gtest/gtest.h>

#include "parse_in_pieces.h"
#include "server/openai_json.h"

namespace strata::server {
namespace {

using test_support::expect_any_pieces_like_whole;
using test_support::parse_whole;
using Json = nlohmann::json;

OutputParserOptions harmony(bool tools = true) {
  return {.parse_tool_calls = tools, .style = ToolCallStyle::harmony};
}

TEST(HarmonyParser, AnalysisIsReasoningFinalIsContent) {
  // The prompt ends with <|start|>assistant: the output starts at the channel.
  for (const std::string end : {"<|return|>", ""}) {
    const ParsedDelta d = expect_any_pieces_like_whole(
        "<|channel|>analysis<|message|>User asks: \"2 + 2?\" Simple.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4." +
            end,
        harmony(/*tools=*/false));
    EXPECT_EQ(d.reasoning, "User asks: \"2 + 2?\" Simple.");
    EXPECT_EQ(d.content, "2 + 2 = 4.");
    EXPECT_TRUE(d.tool_calls.empty());
  }
}

// <|end|> closes one message, not the turn: what follows is read as the next message; text of
// one kind from two messages is joined with a blank line.
TEST(HarmonyParser, EndClosesOneMessageOnly) {
  const ParsedDelta d = expect_any_pieces_like_whole(
      "<|channel|>analysis<|message|>First thought.<|end|>"
      "<|start|>assistant<|channel|>analysis<|message|>Second thought.<|end|>"
      "<|start|>assistant<|channel|>final<|message|>Done.<|end|>",
      harmony());
  EXPECT_EQ(d.reasoning, "First thought.\n\nSecond thought.");
  EXPECT_EQ(d.content, "Done.");
}

TEST(HarmonyParser, FunctionRecipientIsAToolCall) {
  // The recipient after the channel, with <|constrain|>json ...
  const ParsedDelta after_channel = expect_any_pieces_like_whole(
      "<|channel|>analysis<|message|>Need the weather tool.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
      "<|message|>{\"location\": \"Tokyo\", \"days\": [1, 2]}<|call|>",
      harmony());
  EXPECT_EQ(after_channel.reasoning, "Need the weather tool.");
  EXPECT_EQ(after_channel.content, "");
  ASSERT_EQ(after_channel.tool_calls.size(), 1u);
  EXPECT_EQ(after_channel.tool_calls[0].name, "get_weather");
  EXPECT_EQ(after_channel.tool_calls[0].arguments, "{\"location\": \"Tokyo\", \"days\": [1, 2]}");
  EXPECT_TRUE(after_channel.tool_calls[0].id.starts_with("call_"));
  // ... or in the role part, as the template writes past calls; here in the message the prompt
  // opened ("<|start|>assistant"), so the output starts with the recipient.
  const ParsedDelta in_role = expect_any_pieces_like_whole(
      " to=functions.get_weather<|channel|>commentary json<|message|>{\"location\":\"Paris\"}",
      harmony());
  ASSERT_EQ(in_role.tool_calls.size(), 1u);
  EXPECT_EQ(in_role.tool_calls[0].name, "get_weather");
  EXPECT_EQ(in_role.tool_calls[0].arguments, "{\"location\":\"Paris\"}");
  EXPECT_EQ(in_role.content, "");
}

TEST(HarmonyParser, PreambleIsContentAndArgumentsAreTrimmed) {
  const ParsedDelta d = expect_any_pieces_like_whole(
      "<|channel|>commentary<|message|>**Plan**: write the file, then run it.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.write_file<|constrain|>json"
      "<|message|> \n{\"path\": \"index.html\"}\n <|call|>",
      harmony());
  EXPECT_EQ(d.content, "**Plan**: write the file, then run it.");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"path\": \"index.html\"}");
}

// Arguments go out as they are generated, before the call's message ends.
TEST(HarmonyParser, ArgumentsStreamBeforeTheCallEnds) {
  HarmonyParser p(harmony());
  ParsedDelta first =
      p.push("<|channel|>commentary to=functions.note <|constrain|>json<|message|>");
  ASSERT_EQ(first.tool_call_deltas.size(), 1u);
  EXPECT_EQ(first.tool_call_deltas[0].name, "note");
  EXPECT_FALSE(first.tool_call_deltas[0].id.empty());
  EXPECT_TRUE(first.tool_calls.empty());
  const ParsedDelta second = p.push("{\"text\": \"a long");
  ASSERT_EQ(second.tool_call_deltas.size(), 1u);
  EXPECT_EQ(second.tool_call_deltas[0].arguments, "{\"text\": \"a long");
  EXPECT_TRUE(second.tool_call_deltas[0].id.empty()) << "only the first piece names the call";
  const ParsedDelta end = p.push(" note\"}<|call|>");
  ASSERT_EQ(end.tool_calls.size(), 1u);
  EXPECT_EQ(end.tool_calls[0].arguments, "{\"text\": \"a long note\"}");
  EXPECT_EQ(end.tool_calls[0].id, first.tool_call_deltas[0].id);
  EXPECT_EQ(p.tool_calls_seen(), 1);
}

TEST(HarmonyParser, MalformedHeadersAreDropped) {
  // A header that ends before <|message|>: no message; the next one is read as usual.
  const ParsedDelta d = expect_any_pieces_like_whole(
      "<|channel|>analysis<|end|><|start|>assistant<|channel|>final<|message|>ok", harmony());
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "ok");
  // Cut short inside a header (max_tokens): nothing to show.
  const ParsedDelta cut = expect_any_pieces_like_whole(
      "<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>fin", harmony());
  EXPECT_EQ(cut.reasoning, "hm");
  EXPECT_EQ(cut.content, "");
  // A header that goes on and on is not one: dropped; its message's channel is unknown, so its
  // text is content.
  const ParsedDelta endless = expect_any_pieces_like_whole(
      "<|channel|>analysis to=" + std::string(300, 'x') + "<|message|>kept", harmony());
  EXPECT_EQ(endless.content, "kept");
  EXPECT_TRUE(endless.tool_calls.empty());
}

// Text with no harmony markup where the first header belongs: the model answered plainly.
TEST(HarmonyParser, PlainTextIsContent) {
  const ParsedDelta d = expect_any_pieces_like_whole("It is sunny in Paris.", harmony());
  EXPECT_EQ(d.content, "It is sunny in Paris.");
  const std::string long_text = std::string(300, 'a') + " to= " + std::string(20, 'b');
  EXPECT_EQ(expect_any_pieces_like_whole(long_text, harmony()).content, long_text);
  // A prompt that ends between messages: text before any header is content too.
  OutputParserOptions between = harmony();
  between.open_message = "";
  const ParsedDelta b = expect_any_pieces_like_whole(
      "Hi. \n<|start|>assistant<|channel|>final<|message|>Bye.", between);
  EXPECT_EQ(b.content, "Hi.\n\nBye.");
}

// A recipient that is not a function (built-in tools the request did not offer) is no call: the
// message's text stays in its channel. Without tools in the request, calls are not read either.
TEST(HarmonyParser, UnknownRecipientsStayText) {
  const ParsedDelta python = expect_any_pieces_like_whole(
      "<|channel|>analysis to=python code<|message|>print(1)<|call|>", harmony());
  EXPECT_TRUE(python.tool_calls.empty());
  EXPECT_EQ(python.reasoning, "print(1)");
  const ParsedDelta browser = expect_any_pieces_like_whole(
      "<|channel|>commentary to=browser.search <|constrain|>json<|message|>{\"q\": \"x\"}",
      harmony());
  EXPECT_TRUE(browser.tool_calls.empty());
  EXPECT_EQ(browser.content, "{\"q\": \"x\"}");
  const ParsedDelta nameless =
      parse_whole("<|channel|>commentary to=functions.<|message|>{}", harmony());
  EXPECT_TRUE(nameless.tool_calls.empty());
  EXPECT_EQ(nameless.content, "{}");
  const ParsedDelta no_tools = parse_whole(
      "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": 1}<|call|>",
      harmony(/*tools=*/false));
  EXPECT_TRUE(no_tools.tool_calls.empty());
  EXPECT_EQ(no_tools.content, "{\"a\": 1}");
}

// Cut short (max_tokens) inside a call: it has gone out already and stays a call, its arguments
// ending where the output was cut ("{}" when it had none yet).
TEST(HarmonyParser, CallCutShortStaysACall) {
  const ParsedDelta d = expect_any_pieces_like_whole(
      "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"city\": \"To",
      harmony());
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"city\": \"To");
  const ParsedDelta empty =
      expect_any_pieces_like_whole("<|channel|>commentary to=functions.g<|message|>", harmony());
  ASSERT_EQ(empty.tool_calls.size(), 1u);
  EXPECT_EQ(empty.tool_calls[0].arguments, "{}");
}

// With ignore_eos the output goes on past <|call|>: calls follow one another; without parallel
// tool calls the first one closes the output.
TEST(HarmonyParser, CallsInOrderAndAtMostMaxToolCalls) {
  const std::string two =
      "<|channel|>commentary to=functions.a<|message|>{}<|call|>"
      "<|start|>assistant<|channel|>commentary to=functions.b<|message|>{\"x\": 1}<|call|>";
  const ParsedDelta both = expect_any_pieces_like_whole(two, harmony());
  ASSERT_EQ(both.tool_calls.size(), 2u);
  EXPECT_EQ(both.tool_calls[1].name, "b");
  EXPECT_NE(both.tool_calls[0].id, both.tool_calls[1].id);
  OutputParserOptions one = harmony();
  one.max_tool_calls = 1;
  HarmonyParser p(one);
  ParsedDelta d = p.push(two);
  EXPECT_TRUE(p.closed());
  d.append(p.finish());
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "a");
}

// A continued final message (the prompt ends inside it): the output is the rest of its text.
TEST(HarmonyParser, ContinuedMessage) {
  OutputParserOptions o = harmony();
  o.open_message = "assistant<|channel|>final<|message|>Hel";
  const ParsedDelta d = expect_any_pieces_like_whole("lo there.<|return|>", o);
  EXPECT_EQ(d.content, "lo there.");
  EXPECT_EQ(d.reasoning, "");
  // A continued call is announced (id and name) with the first output.
  o.open_message = "assistant to=functions.f<|channel|>commentary json<|message|>{\"a\":";
  const ParsedDelta call = expect_any_pieces_like_whole(" 1}", o);
  ASSERT_EQ(call.tool_calls.size(), 1u);
  EXPECT_EQ(call.tool_calls[0].name, "f");
  EXPECT_EQ(call.tool_calls[0].arguments, "1}");
}

// The OpenAI shapes of a parsed call: whole (id, type, function.name, function.arguments) and
// streamed (the first piece with id, type and name; then the arguments only).
TEST(HarmonyParser, OpenAiShapes) {
  const ParsedDelta d = parse_whole(
      "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
      "{\"location\": \"Tokyo\"}<|call|>",
      harmony());
  const auto whole = tool_calls_json(d.tool_calls);
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0]["type"], "function");
  EXPECT_EQ(whole[0]["id"], d.tool_calls[0].id);
  EXPECT_EQ(whole[0]["function"]["name"], "get_weather");
  EXPECT_EQ(Json::parse(whole[0]["function"]["arguments"].get<std::string>()),
            Json({{"location", "Tokyo"}}));
  const auto pieces = tool_call_deltas_json(d.tool_call_deltas);
  ASSERT_GE(pieces.size(), 1u);
  EXPECT_EQ(pieces[0]["index"], 0);
  EXPECT_EQ(pieces[0]["id"], d.tool_calls[0].id);
  EXPECT_EQ(pieces[0]["type"], "function");
  EXPECT_EQ(pieces[0]["function"]["name"], "get_weather");
  for (size_t i = 1; i < pieces.size(); ++i) EXPECT_FALSE(pieces[i].contains("id"));
}

}  // namespace
}  // namespace strata::server
