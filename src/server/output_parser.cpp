#include "server/output_parser.h"

#include <algorithm>

#include "server/stop_matcher.h"

namespace strata::server {
namespace {

constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";
constexpr std::string_view kToolOpen = "<tool_call>", kToolClose = "</tool_call>";

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

}  // namespace

OutputParser::OutputParser(OutputParserOptions options)
    : options_(std::move(options)),
      mode_(options_.parse_reasoning && options_.starts_in_reasoning ? Mode::reasoning
                                                                     : Mode::content),
      trim_next_(mode_ == Mode::reasoning) {}

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
    // Never closed: give the text back as content rather than lose it.
    out.content.append(kToolOpen);
    out.content.append(tool_body_);
    tool_body_.clear();
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
        tool_body_.append(ready);
      } else if (!(tool_calls_seen_ > 0 && mode_ == Mode::content &&
                   std::all_of(ready.begin(), ready.end(), is_space))) {
        emit(out, ready);  // (whitespace between tool calls is not content)
      }
      buffer_.erase(0, ready.size());
      return;
    }
    const std::string_view before(buffer_.data(), at);
    if (mode_ == Mode::tool_call) {
      tool_body_.append(before);
      if (auto call = parse_tool_call(tool_body_, options_.tools)) {
        out.tool_calls.push_back(std::move(*call));
        if (++tool_calls_seen_ == options_.max_tool_calls) {
          closed_ = true;
          buffer_.clear();
          tool_body_.clear();
          return;
        }
      } else {
        out.content.append(kToolOpen).append(tool_body_).append(kToolClose);
      }
      tool_body_.clear();
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
      trim_next_ = mode_ == Mode::reasoning;
    }
    buffer_.erase(0, at + tag.size());
  }
}

}  // namespace strata::server
