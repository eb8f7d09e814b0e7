#pragma once
// Feeding a chat parser the way a stream arrives: in pieces cut anywhere. A response parsed in
// any pieces must equal the one parsed whole, and its tool-call pieces must add up to the
// whole response's arguments.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/output_parser.h"

namespace strata::server::test_support {

// Parses `text` cut at the given offsets (sorted), then finish(); the deltas, merged.
inline ParsedDelta parse_cut(const std::string& text, const std::vector<size_t>& cuts,
                             const OutputParserOptions& options) {
  auto parser = make_output_parser(options);
  ParsedDelta all;
  size_t from = 0;
  for (size_t cut : cuts) {
    all.append(parser->push(text.substr(from, cut - from)));
    from = cut;
  }
  all.append(parser->push(text.substr(from)));
  all.append(parser->finish());
  return all;
}

inline ParsedDelta parse_whole(const std::string& text, const OutputParserOptions& options) {
  return parse_cut(text, {}, options);
}

// The streamed pieces of each call, concatenated; checks that the first piece names the call.
inline std::vector<std::string> streamed_arguments(const ParsedDelta& d) {
  std::vector<std::string> out;
  for (const ToolCallDelta& x : d.tool_call_deltas) {
    if (static_cast<size_t>(x.index) == out.size()) {
      EXPECT_FALSE(x.id.empty()) << "the first piece of call " << x.index << " names it";
      EXPECT_FALSE(x.name.empty());
      out.emplace_back();
    }
    EXPECT_LT(static_cast<size_t>(x.index), out.size());
    if (static_cast<size_t>(x.index) < out.size()) out[static_cast<size_t>(x.index)] += x.arguments;
  }
  return out;
}

inline void expect_same_response(const ParsedDelta& got, const ParsedDelta& want,
                                 const std::string& where) {
  EXPECT_EQ(got.reasoning, want.reasoning) << where;
  EXPECT_EQ(got.content, want.content) << where;
  ASSERT_EQ(got.tool_calls.size(), want.tool_calls.size()) << where;
  for (size_t i = 0; i < got.tool_calls.size(); ++i) {
    EXPECT_EQ(got.tool_calls[i].name, want.tool_calls[i].name) << where;
    EXPECT_EQ(got.tool_calls[i].arguments, want.tool_calls[i].arguments) << where;
  }
  const std::vector<std::string> pieces = streamed_arguments(got);
  ASSERT_EQ(pieces.size(), got.tool_calls.size()) << where;
  for (size_t i = 0; i < pieces.size(); ++i)
    EXPECT_EQ(pieces[i], got.tool_calls[i].arguments) << where << " call " << i;
}

// Cut once at every byte, and into single bytes: always the whole response.
inline ParsedDelta expect_any_pieces_like_whole(const std::string& text,
                                                const OutputParserOptions& options) {
  const ParsedDelta whole = parse_whole(text, options);
  for (size_t cut = 0; cut <= text.size(); ++cut)
    expect_same_response(parse_cut(text, {cut}, options), whole, "cut at " + std::to_string(cut));
  std::vector<size_t> every;
  for (size_t i = 1; i < text.size(); ++i) every.push_back(i);
  expect_same_response(parse_cut(text, every, options), whole, "one byte at a time");
  return whole;
}

}  // namespace strata::server::test_support
