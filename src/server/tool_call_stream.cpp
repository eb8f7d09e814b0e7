#include "server/tool_call_stream.h"

#include "server/tool_calls.h"

namespace strata::server {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

// A string as the inside of a JSON string literal (without the quotes).
std::string json_escaped(std::string_view s) {
  const std::string quoted =
      nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return quoted.substr(1, quoted.size() - 2);
}

// How much of the end of `text` could be the start of `tag` (to hold back).
size_t tag_prefix_at_end(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

// How many bytes at the end of `text` begin a UTF-8 character that is not complete yet (held
// back: a piece escaped alone would turn them into U+FFFD).
size_t incomplete_utf8_suffix(std::string_view text) {
  for (size_t n = 1; n <= std::min<size_t>(3, text.size()); ++n) {
    const auto c = static_cast<unsigned char>(text[text.size() - n]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return length > n ? n : 0;
  }
  return 0;
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

enum class Match { yes, no, more };

// Reads the JSON form's header, {"name": "f", "arguments": , up to the arguments' first byte.
class HeaderReader {
 public:
  explicit HeaderReader(std::string_view s) : s_(s) {}
  Match literal(std::string_view lit) {
    skip_space();
    const std::string_view rest = s_.substr(i_);
    if (rest.size() < lit.size()) return lit.starts_with(rest) ? Match::more : Match::no;
    if (!rest.starts_with(lit)) return Match::no;
    i_ += lit.size();
    return Match::yes;
  }
  Match string(std::string& out) {
    skip_space();
    if (i_ >= s_.size()) return Match::more;
    if (s_[i_] != '"') return Match::no;
    for (size_t j = i_ + 1; j < s_.size(); ++j) {
      if (s_[j] == '\\') {
        ++j;
      } else if (s_[j] == '"') {
        const auto v = nlohmann::json::parse(s_.substr(i_, j + 1 - i_), nullptr, false);
        if (!v.is_string()) return Match::no;
        out = v.get<std::string>();
        i_ = j + 1;
        return Match::yes;
      }
    }
    return Match::more;
  }
  void skip_space() {
    while (i_ < s_.size() && is_space(s_[i_])) ++i_;
  }
  size_t at() const { return i_; }

 private:
  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

std::string ToolCallStream::emit(std::string piece) {
  arguments_ += piece;
  return piece;
}

void ToolCallStream::recognize() {
  HeaderReader r(body_);
  r.skip_space();
  if (r.at() >= body_.size()) return;
  if (glm_ && body_[r.at()] != '<' && body_[r.at()] != '{') return recognize_glm(r.at());
  if (body_[r.at()] == '<') {
    constexpr std::string_view kOpen = "<function=";
    const std::string_view rest = std::string_view(body_).substr(r.at());
    if (rest.size() < kOpen.size()) {
      if (!kOpen.starts_with(rest)) form_ = Form::not_streamed;
      return;
    }
    const size_t close = rest.find('>');
    if (!rest.starts_with(kOpen) || close == std::string_view::npos) {
      if (!rest.starts_with(kOpen)) form_ = Form::not_streamed;
      return;
    }
    std::string_view name = rest.substr(kOpen.size(), close - kOpen.size());
    while (!name.empty() && is_space(name.front())) name.remove_prefix(1);
    while (!name.empty() && is_space(name.back())) name.remove_suffix(1);
    if (name.empty()) {
      form_ = Form::not_streamed;
      return;
    }
    name_ = std::string(name);
    form_ = Form::xml;
    started_ = true;
    pos_ = r.at() + close + 1;
    return;
  }
  std::string name;
  const auto read = [&](Match m) {
    if (m == Match::no) form_ = Form::not_streamed;
    return m == Match::yes;
  };
  if (!read(r.literal("{")) || !read(r.literal("\"name\"")) || !read(r.literal(":")) ||
      !read(r.string(name)) || !read(r.literal(",")) || !read(r.literal("\"arguments\"")) ||
      !read(r.literal(":")) || !read(r.literal("{")))
    return;
  name_ = name;
  form_ = Form::json;
  started_ = true;
  pos_ = r.at() - 1;  // the arguments' opening brace
}

// GLM: the function's name runs to the first newline or tag.
void ToolCallStream::recognize_glm(size_t at) {
  constexpr size_t kMaxName = 256;
  const std::string_view rest = std::string_view(body_).substr(at);
  const size_t end = rest.find_first_of("\n<");
  const std::string_view name = trimmed(rest.substr(0, end));
  if (!is_glm_function_name(name) || (end == std::string_view::npos && rest.size() > kMaxName)) {
    form_ = Form::not_streamed;
    return;
  }
  if (end == std::string_view::npos) return;  // the name may go on
  name_ = std::string(name);
  form_ = Form::glm;
  started_ = true;
  pos_ = at + end;
}

std::string ToolCallStream::scan_json() {
  std::string out;
  for (; pos_ < body_.size() && !arguments_done_; ++pos_) {
    const char c = body_[pos_];
    out += c;
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
    } else if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if ((c == '}' || c == ']') && --depth_ == 0) {
      arguments_done_ = true;
    }
  }
  return emit(std::move(out));
}

std::string ToolCallStream::scan_xml(bool at_end) {
  constexpr std::string_view kParameter = "<parameter=", kClose = "</parameter>",
                             kFunctionEnd = "</function>";
  std::string out;
  while (!arguments_done_) {
    const std::string_view rest = std::string_view(body_).substr(pos_);
    if (parameter_.empty()) {
      size_t skip = 0;
      while (skip < rest.size() && is_space(rest[skip])) ++skip;
      const std::string_view next = rest.substr(skip);
      if (next.starts_with(kFunctionEnd) || (at_end && next.empty())) {
        out += parameters_ == 0 ? "{}" : "}";
        arguments_done_ = true;
        break;
      }
      const size_t close = next.find('>');
      if (!next.starts_with(kParameter) || close == std::string_view::npos) break;  // wait
      std::string_view trimmed = next.substr(kParameter.size(), close - kParameter.size());
      while (!trimmed.empty() && is_space(trimmed.front())) trimmed.remove_prefix(1);
      while (!trimmed.empty() && is_space(trimmed.back())) trimmed.remove_suffix(1);
      std::string name(trimmed);
      out += parameters_++ == 0 ? "{" : ",";
      out += nlohmann::json(name).dump() + ":";
      const std::string type = tool_parameter_type(tools_, name_, name);
      string_value_ = type.empty() || type == "string";
      if (string_value_) out += '"';
      parameter_ = std::move(name);
      value_started_ = false;
      pos_ += skip + close + 1;
      continue;
    }
    const size_t close = rest.find(kClose);
    std::string_view value = rest.substr(0, close == std::string_view::npos ? rest.size() : close);
    if (close == std::string_view::npos) {
      if (!string_value_) break;  // a JSON value is written when it is complete
      // Stream what cannot be the value's last newline or the start of the closing tag.
      const size_t hold =
          std::max(tag_prefix_at_end(value, "\n</parameter>"), tag_prefix_at_end(value, kClose));
      value.remove_suffix(hold);
      value.remove_suffix(incomplete_utf8_suffix(value));
    }
    if (!value_started_) {
      if (value.empty()) {
        if (close == std::string_view::npos) break;
      } else {
        if (value.front() == '\n') {
          value.remove_prefix(1);
          ++pos_;
        }
        value_started_ = true;
      }
    }
    if (close == std::string_view::npos) {
      out += json_escaped(value);
      pos_ += value.size();
      break;
    }
    if (value.ends_with('\n')) value.remove_suffix(1);
    if (string_value_) {
      out += json_escaped(value);
      out += '"';
    } else {
      const auto parsed = nlohmann::ordered_json::parse(value, nullptr, false);
      out += parsed.is_discarded() ? nlohmann::json(std::string(value)).dump() : parsed.dump();
    }
    pos_ = body_.find(kClose, pos_) + kClose.size();
    parameter_.clear();
  }
  return emit(std::move(out));
}

std::string ToolCallStream::scan_glm(bool at_end) {
  constexpr std::string_view kKey = "<arg_key>", kKeyEnd = "</arg_key>", kValue = "<arg_value>",
                             kValueEnd = "</arg_value>";
  std::string out;
  for (;;) {
    const std::string_view rest = std::string_view(body_).substr(pos_);
    if (!in_value_) {
      // Waits for a whole <arg_key>NAME</arg_key> <arg_value> before writing the member's name.
      size_t skip = 0;
      while (skip < rest.size() && is_space(rest[skip])) ++skip;
      const std::string_view next = rest.substr(skip);
      const size_t key_end = next.find(kKeyEnd);
      if (!next.starts_with(kKey) || key_end == std::string_view::npos) break;
      size_t value_at = key_end + kKeyEnd.size();
      while (value_at < next.size() && is_space(next[value_at])) ++value_at;
      if (!next.substr(value_at).starts_with(kValue)) break;
      const std::string key(trimmed(next.substr(kKey.size(), key_end - kKey.size())));
      out += parameters_++ == 0 ? "{" : ",";
      out += nlohmann::json(key).dump() + ":";
      value_type_ = tool_parameter_type(tools_, name_, key);
      string_value_ = value_type_ == "string";
      if (string_value_) out += '"';
      in_value_ = true;
      pos_ += skip + value_at + kValue.size();
      continue;
    }
    const size_t close = rest.find(kValueEnd);
    if (close == std::string_view::npos) {
      if (!string_value_) break;  // read as JSON when it is complete
      std::string_view value = rest;
      if (!at_end) {
        value.remove_suffix(tag_prefix_at_end(value, kValueEnd));
        value.remove_suffix(incomplete_utf8_suffix(value));
      }
      out += json_escaped(value);
      pos_ += value.size();
      break;
    }
    const std::string_view value = rest.substr(0, close);
    out +=
        string_value_ ? json_escaped(value) + '"' : glm_argument_value(value, value_type_).dump();
    pos_ += close + kValueEnd.size();
    in_value_ = false;
  }
  return emit(std::move(out));
}

// The body is complete: a value left open (its </arg_value> missing) ends with it.
std::string ToolCallStream::finish_glm() {
  std::string rest = scan_glm(/*at_end=*/true);
  if (in_value_) {
    rest +=
        emit(string_value_
                 ? std::string("\"")
                 : glm_argument_value(std::string_view(body_).substr(pos_), value_type_).dump());
    pos_ = body_.size();
    in_value_ = false;
  }
  rest += emit(parameters_ == 0 ? "{}" : "}");
  arguments_done_ = true;
  return rest;
}

std::string ToolCallStream::feed(std::string_view text) {
  body_.append(text);
  if (form_ == Form::unknown) recognize();
  if (form_ == Form::json) return scan_json();
  if (form_ == Form::xml) return scan_xml(/*at_end=*/false);
  if (form_ == Form::glm) return scan_glm(/*at_end=*/false);
  return {};
}

std::string ToolCallStream::finish() {
  if (form_ == Form::glm && !arguments_done_) return finish_glm();
  if (form_ != Form::xml || arguments_done_) return {};
  std::string rest = scan_xml(/*at_end=*/true);
  if (!arguments_done_) {
    // Cut short inside a value: close what is open so the text stays JSON.
    std::string close = string_value_ && !parameter_.empty() ? "\"}" : "}";
    if (parameters_ == 0) close = "{}";
    rest += emit(close);
    arguments_done_ = true;
  }
  return rest;
}

}  // namespace strata::server
