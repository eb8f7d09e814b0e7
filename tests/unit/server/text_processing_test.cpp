// Stop strings, reasoning / tool-call splitting and tool-call bodies, fed the way a stream
// arrives: in pieces cut at every possible place.

#include <gtest/gtest.h>

#include "server/output_parser.h"
#include "server/stop_matcher.h"
#include "server/tool_calls.h"

namespace strata::server {
namespace {

// Feeds `text` to push() in pieces of `piece` bytes, then finish; returns the concatenation.
template <typename Push, typename Finish>
void feed(const std::string& text, size_t piece, Push push, Finish finish) {
  for (size_t i = 0; i < text.size(); i += piece) push(text.substr(i, piece));
  finish();
}

TEST(StopMatcher, CutsAtTheFirstStopStringWhateverThePieces) {
  const std::string text = "alpha beta STOP gamma END";
  for (size_t piece = 1; piece <= text.size(); ++piece) {
    StopMatcher m({"END", "STOP"});
    std::string out;
    bool stopped = false;
    feed(
        text, piece,
        [&](const std::string& p) {
          const auto r = m.push(p);
          out += r.text;
          stopped |= r.stopped;
        },
        [&] { out += m.flush(); });
    EXPECT_TRUE(stopped) << piece;
    EXPECT_EQ(out, "alpha beta ") << piece;
  }
}

TEST(StopMatcher, HoldsOnlyWhatMayStartAStopString) {
  StopMatcher m({"</end>"});
  EXPECT_EQ(m.push("abc</e").text, "abc");  // "</e" may become "</end>"
  EXPECT_EQ(m.push("x").text, "</ex");
  EXPECT_EQ(m.push("<").text, "");
  EXPECT_EQ(m.flush(), "<");  // not a stop string after all: nothing is lost
  StopMatcher none({});
  EXPECT_EQ(none.push("<anything").text, "<anything");
}

TEST(PartialSuffixMatch, LongestProperPrefix) {
  EXPECT_EQ(partial_suffix_match("abc<thi", "<think>"), 4u);
  EXPECT_EQ(partial_suffix_match("abc", "<think>"), 0u);
  EXPECT_EQ(partial_suffix_match("<think>", "<think>"), 0u);  // whole matches are not partial
}

ParsedDelta parse_in_pieces(const std::string& text, size_t piece, OutputParserOptions opt) {
  OutputParser p(std::move(opt));
  ParsedDelta all;
  auto add = [&](ParsedDelta d) { all.append(std::move(d)); };
  feed(
      text, piece, [&](const std::string& s) { add(p.push(s)); }, [&] { add(p.finish()); });
  return all;
}

TEST(OutputParser, SplitsReasoningFromContent) {
  const std::string text = "<think>\nLet me see.\n</think>\n\nThe answer is 4.";
  for (size_t piece = 1; piece <= text.size(); ++piece) {
    const ParsedDelta d = parse_in_pieces(text, piece, {});
    EXPECT_EQ(d.reasoning, "Let me see.\n") << piece;
    EXPECT_EQ(d.content, "The answer is 4.") << piece;
  }
}

TEST(OutputParser, ReasoningOpenedByThePrompt) {
  const ParsedDelta d =
      parse_in_pieces("thinking...</think>done", 3, {.starts_in_reasoning = true});
  EXPECT_EQ(d.reasoning, "thinking...");
  EXPECT_EQ(d.content, "done");
  // Without reasoning parsing the tags are plain content.
  const ParsedDelta plain = parse_in_pieces("<think>x</think>y", 2, {.parse_reasoning = false});
  EXPECT_EQ(plain.content, "<think>x</think>y");
}

TEST(OutputParser, ParsesQwen3JsonToolCalls) {
  const std::string text =
      "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  for (size_t piece : {1, 2, 5, 7, 1000}) {
    const ParsedDelta d = parse_in_pieces(text, piece, {.parse_tool_calls = true});
    EXPECT_EQ(d.content, "Checking.\n") << piece;
    ASSERT_EQ(d.tool_calls.size(), 2u) << piece;
    EXPECT_EQ(d.tool_calls[0].name, "get_weather");
    EXPECT_EQ(nlohmann::json::parse(d.tool_calls[0].arguments),
              nlohmann::json({{"city", "Paris"}}));
    EXPECT_EQ(d.tool_calls[1].name, "get_time");
    EXPECT_EQ(d.tool_calls[1].arguments, "{}");
    EXPECT_NE(d.tool_calls[0].id, d.tool_calls[1].id);
  }
}

// parallel_tool_calls: false: the first call closes the output; what follows is dropped.
TEST(OutputParser, AtMostMaxToolCalls) {
  const std::string text =
      "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>trailing";
  for (size_t piece : {1, 3, 1000}) {
    OutputParser p({.parse_tool_calls = true, .max_tool_calls = 1});
    ParsedDelta all;
    bool closed_early = false;
    for (size_t i = 0; i < text.size(); i += piece) {
      all.append(p.push(text.substr(i, piece)));
      closed_early = closed_early || (p.closed() && i + piece < text.size());
    }
    all.append(p.finish());
    ASSERT_EQ(all.tool_calls.size(), 1u) << piece;
    EXPECT_EQ(all.tool_calls[0].name, "a");
    EXPECT_EQ(all.content, "") << piece;
    EXPECT_TRUE(closed_early || piece >= text.size()) << "closed before the second call arrived";
  }
  const ParsedDelta unlimited = parse_in_pieces(text, 4, {.parse_tool_calls = true});
  EXPECT_EQ(unlimited.tool_calls.size(), 2u);
}

TEST(OutputParser, ParsesQwen3CoderXmlToolCallsWithSchemaTypes) {
  const nlohmann::json tools = nlohmann::json::parse(R"([{"type": "function", "function": {
      "name": "write_file", "parameters": {"type": "object", "properties": {
        "path": {"type": "string"}, "lines": {"type": "integer"}, "force": {"type": "boolean"},
        "text": {"type": "string"}}}}}])");
  const std::string text =
      "<tool_call>\n<function=write_file>\n<parameter=path>\n/tmp/a.txt\n</parameter>\n"
      "<parameter=lines>\n12\n</parameter>\n<parameter=force>\ntrue\n</parameter>\n"
      "<parameter=text>\n123\nline two\n</parameter>\n</function>\n</tool_call>";
  for (size_t piece : {1, 3, 1000}) {
    const ParsedDelta d = parse_in_pieces(text, piece, {.parse_tool_calls = true, .tools = tools});
    ASSERT_EQ(d.tool_calls.size(), 1u);
    EXPECT_EQ(d.tool_calls[0].name, "write_file");
    const auto args = nlohmann::json::parse(d.tool_calls[0].arguments);
    EXPECT_EQ(args["path"], "/tmp/a.txt");
    EXPECT_EQ(args["lines"], 12);
    EXPECT_EQ(args["force"], true);
    EXPECT_EQ(args["text"], "123\nline two");  // declared a string: stays one
    EXPECT_EQ(d.content, "");
  }
}

TEST(OutputParser, MalformedToolCallsStayContent) {
  const ParsedDelta bad =
      parse_in_pieces("<tool_call>not a call</tool_call>", 4, {.parse_tool_calls = true});
  EXPECT_TRUE(bad.tool_calls.empty());
  EXPECT_EQ(bad.content, "<tool_call>not a call</tool_call>");
  // Cut short (max_tokens) where it could still have become a call: neither a call nor text
  // (the tag is not the answer); cut short where it cannot: the text stays.
  const ParsedDelta cut =
      parse_in_pieces("a<tool_call>{\"name\": \"f\"", 4, {.parse_tool_calls = true});
  EXPECT_TRUE(cut.tool_calls.empty());
  EXPECT_EQ(cut.content, "a");
  EXPECT_EQ(parse_in_pieces("a<tool_call>\n", 1, {.parse_tool_calls = true}).content, "a");
  EXPECT_EQ(parse_in_pieces("a<tool_call>not {", 3, {.parse_tool_calls = true}).content,
            "a<tool_call>not {");
  // Without tools in the request, tool-call tags are ordinary text.
  const ParsedDelta off = parse_in_pieces("<tool_call>{\"name\": \"f\"}</tool_call>", 4, {});
  EXPECT_EQ(off.content, "<tool_call>{\"name\": \"f\"}</tool_call>");
}

TEST(ToolCalls, ArgumentsGivenAsAStringAreKept) {
  const auto call = parse_tool_call(R"({"name": "f", "arguments": "{\"a\": 1}"})", nullptr);
  ASSERT_TRUE(call);
  EXPECT_EQ(call->arguments, "{\"a\": 1}");
  EXPECT_FALSE(parse_tool_call(R"({"arguments": {}})", nullptr));                    // no name
  EXPECT_FALSE(parse_tool_call("<function=f><parameter=x>1</parameter>", nullptr));  // unclosed
}

// Streams carry tool calls piece by piece: the first piece names the call, the arguments arrive
// before the call closes, and the pieces add up to the whole call's arguments (the text a
// non-streamed response carries), whatever the pieces the text came in.
void expect_streamed_like_whole(const std::string& text, const OutputParserOptions& options) {
  const ParsedDelta whole = parse_in_pieces(text, 100000, options);
  ASSERT_FALSE(whole.tool_calls.empty()) << text;
  for (size_t piece : {1, 2, 5, 13}) {
    OutputParser p(options);
    std::vector<ToolCallDelta> deltas;
    size_t pieces = 0, pieces_before_complete = 0;
    const auto take = [&](ParsedDelta d) {
      ++pieces;
      for (auto& x : d.tool_call_deltas) {
        if (x.index == 0 && !x.arguments.empty() && d.tool_calls.empty() &&
            pieces_before_complete == 0)
          pieces_before_complete = pieces;
        deltas.push_back(std::move(x));
      }
    };
    feed(
        text, piece, [&](const std::string& t) { take(p.push(t)); }, [&] { take(p.finish()); });
    std::vector<std::string> arguments(whole.tool_calls.size());
    for (const ToolCallDelta& d : deltas) {
      ASSERT_LT(static_cast<size_t>(d.index), arguments.size());
      if (arguments[static_cast<size_t>(d.index)].empty() && d.arguments.empty()) {
        EXPECT_EQ(d.name, whole.tool_calls[static_cast<size_t>(d.index)].name);
        EXPECT_FALSE(d.id.empty()) << "the first piece names the call";
      }
      arguments[static_cast<size_t>(d.index)] += d.arguments;
    }
    for (size_t i = 0; i < arguments.size(); ++i) {
      EXPECT_EQ(arguments[i], whole.tool_calls[i].arguments) << "piece " << piece << " call " << i;
      EXPECT_FALSE(nlohmann::json::parse(arguments[i], nullptr, false).is_discarded());
    }
    if (piece == 1) {
      EXPECT_GT(pieces_before_complete, 0u) << "arguments stream before the close";
    }
  }
}

TEST(OutputParser, ToolCallArgumentsStreamAsPieces) {
  expect_streamed_like_whole(
      "Let me look.\n<tool_call>\n{\"name\": \"read\", \"arguments\": {\"path\": \"a\\\"}b\", "
      "\"range\": [1, {\"x\": \"]\"}]}}\n</tool_call>\n<tool_call>\n{\"name\": \"ls\", "
      "\"arguments\": {}}\n</tool_call>",
      {.parse_tool_calls = true});
  const nlohmann::json tools = nlohmann::json::parse(R"([{"type": "function", "function": {
      "name": "write_file", "parameters": {"type": "object", "properties": {
        "path": {"type": "string"}, "lines": {"type": "integer"}, "text": {"type": "string"}}}}}])");
  expect_streamed_like_whole(
      "<tool_call>\n<function=write_file>\n<parameter=path>\n/tmp/\"a\".txt\n</parameter>\n"
      "<parameter=lines>\n12\n</parameter>\n<parameter=text>\nif (a </b) {\n\n  x\n</para\n\n"
      "</parameter>\n</function>\n</tool_call>",
      {.parse_tool_calls = true, .tools = tools});
  expect_streamed_like_whole("<tool_call>\n<function=noop>\n</function>\n</tool_call>",
                             {.parse_tool_calls = true, .tools = tools});
}

// A body that does not start like a call is not streamed: whole parse at the close, as before.
TEST(OutputParser, UnrecognizedBodiesAreParsedWholeOrKeptAsContent) {
  const ParsedDelta reordered =
      parse_in_pieces("<tool_call>{\"arguments\": {\"a\": 1}, \"name\": \"f\"}</tool_call>", 3,
                      {.parse_tool_calls = true});
  ASSERT_EQ(reordered.tool_calls.size(), 1u);
  ASSERT_EQ(reordered.tool_call_deltas.size(), 1u) << "one piece, at the close";
  EXPECT_EQ(reordered.tool_call_deltas[0].name, "f");
  EXPECT_EQ(reordered.tool_call_deltas[0].arguments, reordered.tool_calls[0].arguments);
  const ParsedDelta bad =
      parse_in_pieces("<tool_call>{\"oops\"</tool_call>", 2, {.parse_tool_calls = true});
  EXPECT_TRUE(bad.tool_call_deltas.empty());
  EXPECT_EQ(bad.content, "<tool_call>{\"oops\"</tool_call>");
}

// A streamed call cut short (max_tokens) has gone out already: it stays a call, its arguments
// closed so they still parse.
TEST(OutputParser, StreamedCallCutShortStaysACall) {
  const nlohmann::json tools = nlohmann::json::parse(R"([{"type": "function", "function": {
      "name": "w", "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}}}])");
  const ParsedDelta xml = parse_in_pieces("<tool_call>\n<function=w>\n<parameter=text>\nhal", 4,
                                          {.parse_tool_calls = true, .tools = tools});
  ASSERT_EQ(xml.tool_calls.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(xml.tool_calls[0].arguments), nlohmann::json({{"text", "hal"}}));
  const ParsedDelta json = parse_in_pieces(
      "<tool_call>{\"name\": \"w\", \"arguments\": {\"text\": \"ha", 4, {.parse_tool_calls = true});
  ASSERT_EQ(json.tool_calls.size(), 1u);
  EXPECT_EQ(json.tool_calls[0].arguments, "{\"text\": \"ha");
  EXPECT_EQ(json.content, "");
}

}  // namespace
}  // namespace strata::server
