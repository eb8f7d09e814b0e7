#pragma once
// Splits a chat model's streamed output into what OpenAI clients expect: `content`,
// `reasoning_content` and `tool_calls`. OutputParser reads the tag formats (the text inside
// <think>...</think> is reasoning, each <tool_call>...</tool_call> block a call: Qwen3 JSON,
// Qwen3-Coder XML or GLM-4.5 bodies); HarmonyParser (harmony_parser.h) reads gpt-oss's channels.
// Both work on text deltas: a tag split across deltas is held back until it is known, so
// streamed and non-streamed responses carry the same text.

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/chat_format.h"
#include "server/tool_call_stream.h"
#include "server/tool_calls.h"

namespace strata::server {

struct OutputParserOptions {
  bool parse_reasoning = true;       // <think> blocks become reasoning_content
  bool starts_in_reasoning = false;  // the prompt already opened <think> (thinking templates)
  bool parse_tool_calls = false;     // only when the request offered tools
  nlohmann::json tools{};            // the request's tools, for parameter types
  int max_tool_calls = 0;            // > 0: the output ends after that many calls
  ToolCallStyle style = ToolCallStyle::json;  // which parser, and which tool-call bodies
  // harmony: the message the prompt leaves open (see harmony_open_message).
  std::string open_message = "assistant";
};

// A piece of a tool call as a stream carries it: the first piece of call `index` names it (id and
// name), every piece adds to its arguments.
struct ToolCallDelta {
  int index = 0;
  std::string id{}, name{};  // on the first piece only
  std::string arguments{};
};

struct ParsedDelta {
  std::string content;
  std::string reasoning;
  std::vector<ToolCall> tool_calls;             // completed calls (whole responses)
  std::vector<ToolCallDelta> tool_call_deltas;  // the same calls piece by piece (streams)
  bool empty() const {
    return content.empty() && reasoning.empty() && tool_calls.empty() && tool_call_deltas.empty();
  }
  // Adds what came after (text concatenated, tool calls in order, pieces of one call merged).
  void append(ParsedDelta&& later) {
    content += later.content;
    reasoning += later.reasoning;
    for (auto& c : later.tool_calls) tool_calls.push_back(std::move(c));
    for (auto& d : later.tool_call_deltas) add_tool_call_delta(std::move(d));
  }
  void add_tool_call_delta(ToolCallDelta d) {
    if (!tool_call_deltas.empty() && tool_call_deltas.back().index == d.index && d.id.empty()) {
      tool_call_deltas.back().arguments += d.arguments;
    } else {
      tool_call_deltas.push_back(std::move(d));
    }
  }
};

// One response's output, read as it streams.
class ChatOutputParser {
 public:
  virtual ~ChatOutputParser() = default;
  virtual ParsedDelta push(std::string_view text) = 0;
  // End of the output: releases held text.
  virtual ParsedDelta finish() = 0;
  virtual int tool_calls_seen() const = 0;
  // max_tool_calls were made: the rest of the output is dropped (the generation can end).
  virtual bool closed() const = 0;
};

// The parser for options.style.
std::unique_ptr<ChatOutputParser> make_output_parser(OutputParserOptions options);

// The tag formats (json, xml, glm).
class OutputParser final : public ChatOutputParser {
 public:
  explicit OutputParser(OutputParserOptions options);

  ParsedDelta push(std::string_view text) override;
  // An unterminated tool call block stays content.
  ParsedDelta finish() override;

  int tool_calls_seen() const override { return tool_calls_seen_; }
  bool closed() const override { return closed_; }

 private:
  enum class Mode { content, reasoning, tool_call };
  void emit(ParsedDelta& out, std::string_view text) const;
  void run(ParsedDelta& out, bool at_end);
  // More of the open call's body: into tool_body_ and, once recognized, out as pieces.
  void add_tool_text(ParsedDelta& out, std::string_view text);
  // The open call is complete (closed or at the end of the output): a call, or its text back
  // as content when it was never recognized.
  void end_tool_call(ParsedDelta& out, bool closed);

  OutputParserOptions options_;
  Mode mode_;
  std::string buffer_;                    // text not yet classified
  std::string tool_body_;                 // inside <tool_call>
  std::optional<ToolCallStream> stream_;  // the open call, read as it streams
  std::string stream_id_;                 // its id, given when its name is known
  bool trim_next_ = false;  // drop whitespace that opens a reasoning or content section
  int tool_calls_seen_ = 0;
  bool closed_ = false;
};

}  // namespace strata::server
