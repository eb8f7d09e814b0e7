#pragma once
// gpt-oss output (the OpenAI harmony format) split into reasoning, content and tool calls. The
// output is a series of messages, <|start|>HEADER<|message|>TEXT<|end|>, the first one opened by
// the prompt (which ends with <|start|>assistant, so the output starts in a header). The header
// names the channel (<|channel|>analysis) and maybe a recipient (to=functions.f, in the role part
// or after the channel) and a content type (<|constrain|>json). A message is
//   a tool call when its recipient is functions.NAME (and the request offered tools): its text,
//     trimmed, is the call's arguments, streamed as it comes;
//   reasoning when its channel is analysis;
//   content otherwise (final, or a commentary preamble; also a recipient that is no function:
//     its text stays in its channel rather than being lost).
// A message ends with <|end|>, <|return|> or <|call|> (or where the next one starts). Text of
// one kind written by two messages is joined with a blank line. A header that never reaches
// <|message|> (cut short, or malformed) is dropped; text with no harmony markup where the first
// header belongs (a model not writing harmony) is content.

#include "server/output_parser.h"

namespace strata::server {

class HarmonyParser final : public ChatOutputParser {
 public:
  explicit HarmonyParser(OutputParserOptions options);

  ParsedDelta push(std::string_view text) override;
  // A message cut short ends there: a call stands with the arguments it spelled ("{}" if none).
  ParsedDelta finish() override;

  int tool_calls_seen() const override { return tool_calls_seen_; }
  bool closed() const override { return closed_; }

 private:
  enum class Mode { between, header, body };
  enum class Kind { reasoning, content, call };
  void run(ParsedDelta& out, bool at_end);
  void add_text(ParsedDelta& out, std::string_view text);  // in the current mode
  void open_header(std::string_view first);
  void end_header(ParsedDelta& out);   // <|message|>: what the message is
  void drop_header(ParsedDelta& out);  // a header that never reached <|message|>
  void add_body(ParsedDelta& out, std::string_view text);
  void end_message(ParsedDelta& out);

  OutputParserOptions options_;
  Mode mode_ = Mode::between;
  Kind kind_ = Kind::content;
  std::string buffer_;              // text not yet classified
  std::string header_;              // the open header
  size_t header_from_prompt_ = 0;   // how much of header_ the prompt wrote
  bool first_header_ = false;       // the header is the one the prompt opened
  bool header_overflow_ = false;    // the header went past its limit: dropped
  bool message_has_text_ = false;   // the open message wrote text (reasoning / content)
  bool reasoning_written_ = false;  // an earlier message wrote reasoning / content
  bool content_written_ = false;
  std::string call_id_, call_name_, arguments_;
  std::string held_space_;     // the call's trailing whitespace, written only if text follows
  std::string between_space_;  // trailing whitespace of text outside messages, likewise
  ParsedDelta pending_;        // the call the prompt opened, announced with the first output
  int tool_calls_seen_ = 0;
  bool closed_ = false;
};

}  // namespace strata::server
