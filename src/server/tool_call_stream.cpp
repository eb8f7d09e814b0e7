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

std::string ToolCallStream::feed(std::string_view text) {
  body_.append(text);
  if (form_ == Form::unknown) recognize();
  if (form_ == Form::json) return scan_json();
  if (form_ == Form::xml) return scan_xml(/*at_end=*/false);
  return {};
}

std::string ToolCallStream::finish() {
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
