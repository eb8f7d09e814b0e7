#include "server/output_parser.h"

#include <algorithm>

#include "server/harmony_parser.h"
#include "server/stop_matcher.h"

namespace strata::server {
namespace {

constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";
constexpr std::string_view kToolOpen = "<tool_call>", kToolClose = "</tool_call>";

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

}  // namespace

std::unique_ptr<ChatOutputParser> make_output_parser(OutputParserOptions options) {
  if (options.style == ToolCallStyle::harmony)
    return std::make_unique<HarmonyParser>(std::move(options));
  return std::make_unique<OutputParser>(std::move(options));
}

OutputParser::OutputParser(OutputParserOptions options)
    : options_(std::move(options)),
      mode_(options_.parse_reasoning && options_.starts_in_reasoning ? Mode::reasoning
                                                                     : Mode::content),
      // (GLM answers open with a newline before <think> or the text)
      trim_next_(mode_ == Mode::reasoning || options_.style == ToolCallStyle::glm) {}

void OutputParser::emit(ParsedDelta& out, std::string_view text) const {
  if (mode_ == Mode::reasoning) {
    out.reasoning.append(text);
  } else {
    out.content.append(text);
  }
}

ParsedDelta OutputParser::push(std::string_view text) {
  ParsedDelta out;
  if (closed_) return out;
  buffer_.append(text);
  run(out, false);
  return out;
}

ParsedDelta OutputParser::finish() {
  ParsedDelta out;
  if (closed_) return out;
  run(out, true);
  if (mode_ == Mode::tool_call) {
    end_tool_call(out, /*closed=*/false);
    mode_ = Mode::content;
  }
  out.content.append(buffer_);
  buffer_.clear();
  return out;
}

void OutputParser::run(ParsedDelta& out, bool at_end) {
  while (!buffer_.empty()) {
    if (trim_next_ && mode_ != Mode::tool_call) {
      const auto first = std::find_if_not(buffer_.begin(), buffer_.end(), is_space);
      buffer_.erase(buffer_.begin(), first);
      if (buffer_.empty()) return;
      trim_next_ = false;
    }
    // The tags that matter in this mode.
    std::vector<std::string_view> tags;
    if (mode_ == Mode::reasoning) {
      tags = {kThinkClose};
    } else if (mode_ == Mode::tool_call) {
      tags = {kToolClose};
    } else {
      if (options_.parse_reasoning) tags.push_back(kThinkOpen);
      if (options_.parse_tool_calls) tags.push_back(kToolOpen);
    }
    size_t at = std::string::npos;
    std::string_view tag;
    for (std::string_view t : tags) {
      const size_t p = buffer_.find(t);
      if (p < at) at = p, tag = t;
    }
    if (at == std::string::npos) {
      // No whole tag: keep back a suffix that may be the start of one.
      size_t hold = 0;
      if (!at_end) {
        for (std::string_view t : tags) hold = std::max(hold, partial_suffix_match(buffer_, t));
      }
      const std::string_view ready(buffer_.data(), buffer_.size() - hold);
      if (mode_ == Mode::tool_call) {
        add_tool_text(out, ready);
      } else if (!(tool_calls_seen_ > 0 && mode_ == Mode::content &&
                   std::all_of(ready.begin(), ready.end(), is_space))) {
        emit(out, ready);  // (whitespace between tool calls is not content)
      }
      buffer_.erase(0, ready.size());
      return;
    }
    const std::string_view before(buffer_.data(), at);
    if (mode_ == Mode::tool_call) {
      add_tool_text(out, before);
      end_tool_call(out, /*closed=*/true);
      if (closed_) {
        buffer_.clear();
        return;
      }
      mode_ = Mode::content;
      trim_next_ = true;
    } else if (tag == kThinkClose) {
      emit(out, before);
      mode_ = Mode::content;
      trim_next_ = true;
    } else {
      if (!(tool_calls_seen_ > 0 && std::all_of(before.begin(), before.end(), is_space)))
        emit(out, before);
      mode_ = tag == kThinkOpen ? Mode::reasoning : Mode::tool_call;
      if (mode_ == Mode::tool_call) stream_.emplace(options_.tools, options_.style);
      trim_next_ = mode_ == Mode::reasoning;
    }
    buffer_.erase(0, at + tag.size());
  }
}

void OutputParser::add_tool_text(ParsedDelta& out, std::string_view text) {
  tool_body_.append(text);
  const bool was_started = stream_->started();
  std::string piece = stream_->feed(text);
  if (!stream_->started()) return;
  ToolCallDelta d{.index = tool_calls_seen_, .arguments = std::move(piece)};
  if (!was_started) {
    stream_id_ = next_tool_call_id();
    d.id = stream_id_;
    d.name = stream_->name();
  }
  if (!d.id.empty() || !d.arguments.empty()) out.add_tool_call_delta(std::move(d));
}

void OutputParser::end_tool_call(ParsedDelta& out, bool closed) {
  std::optional<ToolCall> call;
  if (stream_->started()) {
    // Its pieces went out already: the call stands, with the arguments they spelled.
    if (std::string rest = stream_->finish(); !rest.empty())
      out.add_tool_call_delta({.index = tool_calls_seen_, .arguments = std::move(rest)});
    call = ToolCall{stream_id_, stream_->name(), stream_->arguments()};
  } else if (closed) {
    call = parse_tool_call(tool_body_, options_.tools, options_.style);
    if (call) {
      out.add_tool_call_delta({.index = tool_calls_seen_,
                               .id = call->id,
                               .name = call->name,
                               .arguments = call->arguments});
    }
  }
  if (call) {
    out.tool_calls.push_back(std::move(*call));
    if (++tool_calls_seen_ == options_.max_tool_calls) closed_ = true;
  } else if (closed || !stream_->undecided()) {
    // Never recognized: give the text back as content rather than lose it.
    out.content.append(kToolOpen).append(tool_body_);
    if (closed) out.content.append(kToolClose);
  }  // (else cut short before its name was complete: no call, and no text to show)
  tool_body_.clear();
  stream_.reset();
}

}  // namespace strata::server
