#include "server/harmony_parser.h"

#include <algorithm>
#include <array>
#include <utility>

#include "server/stop_matcher.h"

namespace strata::server {
namespace {

constexpr std::string_view kStart = "<|start|>", kEnd = "<|end|>", kMessage = "<|message|>",
                           kChannel = "<|channel|>", kReturn = "<|return|>", kCall = "<|call|>";
constexpr size_t kMaxHeader = 256;  // bytes a header may take before it is not one

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

bool all_space(std::string_view s) {
  return std::all_of(s.begin(), s.end(), is_space);
}

// Header markup: a channel or a recipient.
bool has_markup(std::string_view header) {
  return header.find(kChannel) != std::string_view::npos ||
         header.find("to=") != std::string_view::npos;
}

// The word after `marker` in a header (up to a space or the next tag), "" when it is absent.
std::string_view header_field(std::string_view header, std::string_view marker) {
  const size_t at = header.find(marker);
  if (at == std::string_view::npos) return {};
  std::string_view rest = header.substr(at + marker.size());
  while (!rest.empty() && is_space(rest.front())) rest.remove_prefix(1);
  size_t end = 0;
  while (end < rest.size() && !is_space(rest[end]) && rest[end] != '<') ++end;
  return rest.substr(0, end);
}

}  // namespace

HarmonyParser::HarmonyParser(OutputParserOptions options) : options_(std::move(options)) {
  if (options_.open_message.empty()) return;
  // The prompt's open message, read as if generated; its text is the prompt's, not the answer's.
  open_header("");
  first_header_ = true;
  buffer_ = options_.open_message;
  ParsedDelta prompt;
  run(prompt, /*at_end=*/true);
  header_from_prompt_ = header_.size();
  for (ToolCallDelta& d : prompt.tool_call_deltas) {
    if (d.id.empty()) continue;  // (a continued call: only what follows is its answer)
    d.arguments.clear();
    pending_.tool_call_deltas.push_back(std::move(d));
  }
  arguments_.clear();
  held_space_.clear();
  message_has_text_ = mode_ == Mode::body;  // (a continued message needs no separator)
  reasoning_written_ = content_written_ = false;
}

ParsedDelta HarmonyParser::push(std::string_view text) {
  ParsedDelta out = std::exchange(pending_, {});
  if (closed_) return out;
  buffer_.append(text);
  run(out, /*at_end=*/false);
  return out;
}

ParsedDelta HarmonyParser::finish() {
  ParsedDelta out = std::exchange(pending_, {});
  if (closed_) return out;
  run(out, /*at_end=*/true);
  if (mode_ == Mode::header) drop_header(out);
  if (mode_ == Mode::body) end_message(out);
  return out;
}

void HarmonyParser::run(ParsedDelta& out, bool at_end) {
  while (!buffer_.empty() && !closed_) {
    // The tags that matter in this mode.
    static constexpr std::array<std::string_view, 5> kHeaderTags = {kMessage, kStart, kEnd, kReturn,
                                                                    kCall},
                                                     kOtherTags = {kStart, kChannel, kEnd, kReturn,
                                                                   kCall};
    const auto& tags = mode_ == Mode::header ? kHeaderTags : kOtherTags;
    size_t at = std::string::npos;
    std::string_view tag;
    for (const std::string_view t : tags) {
      const size_t p = buffer_.find(t);
      if (p < at) at = p, tag = t;
    }
    if (at == std::string::npos) {
      // No whole tag: keep back a suffix that may be the start of one.
      size_t hold = 0;
      if (!at_end) {
        for (const std::string_view t : tags)
          hold = std::max(hold, partial_suffix_match(buffer_, t));
      }
      const size_t ready = buffer_.size() - hold;
      add_text(out, std::string_view(buffer_).substr(0, ready));
      buffer_.erase(0, ready);
      return;
    }
    add_text(out, std::string_view(buffer_).substr(0, at));
    between_space_.clear();  // (whitespace before a tag)
    if (mode_ == Mode::header && tag == kMessage) {
      end_header(out);
    } else {
      if (mode_ == Mode::header) drop_header(out);
      if (mode_ == Mode::body) end_message(out);
      if (tag == kStart) open_header("");
      if (tag == kChannel) open_header(kChannel);
    }
    buffer_.erase(0, at + tag.size());
  }
  if (closed_) buffer_.clear();
}

void HarmonyParser::add_text(ParsedDelta& out, std::string_view text) {
  if (text.empty()) return;
  if (mode_ == Mode::body) return add_body(out, text);
  if (mode_ == Mode::between) {
    // Text outside any message is content; whitespace alone (between messages) is not, so
    // trailing whitespace waits for more text.
    std::string piece = std::exchange(between_space_, {});
    piece.append(text);
    const size_t last = piece.find_last_not_of(" \t\r\n");
    between_space_ = piece.substr(last == std::string::npos ? 0 : last + 1);
    piece.resize(piece.size() - between_space_.size());
    if (!piece.empty()) {
      out.content += piece;
      content_written_ = true;
    }
    return;
  }
  if (header_overflow_) return;
  const size_t room = header_from_prompt_ + kMaxHeader - header_.size();
  header_.append(text.substr(0, room));
  if (text.size() <= room) return;
  // Too long for a header. Plain text where the first header belongs is the answer (content
  // from here on); anything else is dropped up to the next tag.
  if (first_header_ && !has_markup(std::string_view(header_).substr(header_from_prompt_))) {
    drop_header(out);
    mode_ = Mode::body;
    kind_ = Kind::content;
    message_has_text_ = true;
    add_body(out, text.substr(room));
  } else {
    header_overflow_ = true;
    header_.clear();
    header_from_prompt_ = 0;
  }
}

void HarmonyParser::open_header(std::string_view first) {
  mode_ = Mode::header;
  header_ = std::string(first);
  header_from_prompt_ = 0;
  first_header_ = header_overflow_ = false;
  between_space_.clear();
}

void HarmonyParser::end_header(ParsedDelta& out) {
  const std::string_view channel = header_field(header_, kChannel);
  const std::string_view recipient = header_field(header_, "to=");
  constexpr std::string_view kFunctions = "functions.";
  if (options_.parse_tool_calls && recipient.starts_with(kFunctions) &&
      recipient.size() > kFunctions.size()) {
    kind_ = Kind::call;
    call_id_ = next_tool_call_id();
    call_name_ = std::string(recipient.substr(kFunctions.size()));
    arguments_.clear();
    held_space_.clear();
    out.add_tool_call_delta({.index = tool_calls_seen_, .id = call_id_, .name = call_name_});
  } else {
    // (an over-long header's channel is unknown: content)
    kind_ = channel == "analysis" && options_.parse_reasoning && !header_overflow_ ? Kind::reasoning
                                                                                   : Kind::content;
  }
  header_overflow_ = false;
  mode_ = Mode::body;
  message_has_text_ = false;
  header_.clear();
  header_from_prompt_ = 0;
}

void HarmonyParser::drop_header(ParsedDelta& out) {
  const std::string_view written = std::string_view(header_).substr(header_from_prompt_);
  if (first_header_ && !header_overflow_ && !has_markup(written) && !all_space(written)) {
    out.content.append(written);  // no markup: the model answered without harmony
    content_written_ = true;
  }
  mode_ = Mode::between;
  header_.clear();
  header_from_prompt_ = 0;
  first_header_ = header_overflow_ = false;
}

void HarmonyParser::add_body(ParsedDelta& out, std::string_view text) {
  if (kind_ != Kind::call) {
    std::string& field = kind_ == Kind::reasoning ? out.reasoning : out.content;
    bool& written = kind_ == Kind::reasoning ? reasoning_written_ : content_written_;
    if (!message_has_text_ && written) field += "\n\n";
    field.append(text);
    written = message_has_text_ = true;
    return;
  }
  // The arguments: the message's text without the whitespace around it.
  std::string piece = std::exchange(held_space_, {});
  piece.append(text);
  if (arguments_.empty()) {
    const size_t first = piece.find_first_not_of(" \t\r\n");
    piece.erase(0, first == std::string::npos ? piece.size() : first);
  }
  const size_t last = piece.find_last_not_of(" \t\r\n");
  held_space_ = piece.substr(last == std::string::npos ? 0 : last + 1);
  piece.resize(piece.size() - held_space_.size());
  if (piece.empty()) return;
  arguments_ += piece;
  out.add_tool_call_delta({.index = tool_calls_seen_, .arguments = std::move(piece)});
}

void HarmonyParser::end_message(ParsedDelta& out) {
  mode_ = Mode::between;
  if (kind_ != Kind::call) return;
  if (arguments_.empty()) {
    arguments_ = "{}";
    out.add_tool_call_delta({.index = tool_calls_seen_, .arguments = arguments_});
  }
  out.tool_calls.push_back({call_id_, call_name_, std::exchange(arguments_, {})});
  held_space_.clear();
  kind_ = Kind::content;
  if (++tool_calls_seen_ == options_.max_tool_calls) closed_ = true;
}

}  // namespace strata::server
