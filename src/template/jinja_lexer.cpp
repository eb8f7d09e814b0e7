#include "template/jinja_lexer.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "template/jinja_unicode.h"

namespace strata::jinja {

namespace {

std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();  // keep_trailing_newline=False
  return out;
}

// Python's str.isspace for the code point starting at text[i]; sets its byte length.
bool space_at(std::string_view text, size_t i, size_t& length) {
  const auto b = static_cast<unsigned char>(text[i]);
  length = 1;
  if (b < 0x80) return unicode::is_space(b);
  size_t n = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
  if (i + n > text.size()) return false;
  const std::u32string cp = unicode::decode(text.substr(i, n));
  if (cp.size() != 1 || !unicode::is_space(cp[0])) return false;
  length = n;
  return true;
}

size_t skip_space(std::string_view text, size_t i) {
  size_t length = 0;
  while (i < text.size() && space_at(text, i, length)) i += length;
  return i;
}

// str.rstrip(): the length of `text` without its trailing whitespace.
size_t rstrip_length(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80 &&
           end - start < 4) {
      --start;
    }
    size_t length = 0;
    if (!space_at(text, start, length) || start + length != end) break;
    end = start;
  }
  return end;
}

bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}

bool is_name_char(char c) {
  return is_name_start(c) || (c >= '0' && c <= '9');
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  Lexer(std::string_view source, const LexerOptions& options)
      : src_(normalize_newlines(source)), options_(options) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    bool line_starting = true;  // the previous token ended a line (jinja's lstrip condition)
    size_t pos = 0;
    while (pos < src_.size()) {
      const size_t start = find_tag(pos);
      if (start == std::string::npos) {
        emit_text(pos, src_.substr(pos));
        break;
      }
      const char kind = src_[start + 1];
      size_t p = start + 2;
      char control = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) control = src_[p++];
      std::string_view text = std::string_view(src_).substr(pos, start - pos);
      if (control == '-') {
        text = text.substr(0, rstrip_length(text));
      } else if (control != '+' && options_.lstrip_blocks && kind != '{') {
        text = lstrip_before_tag(text, line_starting);
      }
      emit_text(pos, text);

      if (kind == '#') {
        pos = lex_comment(start, p);
      } else if (kind == '%' && try_raw(start, p, pos)) {
        // try_raw emitted the raw text and moved pos past {% endraw %}
      } else {
        pos = lex_tag(start, p, kind == '{');
      }
      line_starting = pos > 0 && src_[pos - 1] == '\n';
    }
    Token eof;
    eof.kind = TokenKind::eof;
    eof.pos = position(src_.size());
    tokens_.push_back(std::move(eof));
    return std::move(tokens_);
  }

 private:
  SourcePos position(size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const size_t line = static_cast<size_t>(it - line_starts_.begin());
    const size_t line_start = line_starts_[line - 1];
    int column = 1;
    for (size_t i = line_start; i < offset && i < src_.size(); ++i) {
      if ((static_cast<unsigned char>(src_[i]) & 0xC0) != 0x80) ++column;
    }
    return SourcePos{static_cast<int>(line), column};
  }

  template <typename... Args>
  [[noreturn]] void error(size_t offset, fmt::format_string<Args...> format, Args&&... args) const {
    throw located_error(position(offset), fmt::format(format, std::forward<Args>(args)...));
  }

  size_t find_tag(size_t pos) const {
    while (true) {
      const size_t i = src_.find('{', pos);
      if (i == std::string::npos || i + 1 >= src_.size()) return std::string::npos;
      const char c = src_[i + 1];
      if (c == '{' || c == '%' || c == '#') return i;
      pos = i + 1;
    }
  }

  // lstrip_blocks: drop the whitespace between the last line start and the tag (jinja2 3.1
  // matches it with Python's \s, so Unicode spaces count too).
  static std::string_view lstrip_before_tag(std::string_view text, bool line_starting) {
    const size_t newline = text.rfind('\n');
    const size_t line_start = newline == std::string_view::npos ? 0 : newline + 1;
    if (line_start == 0 && !line_starting) return text;
    if (skip_space(text, line_start) != text.size()) return text;
    return text.substr(0, line_start);
  }

  void emit_text(size_t offset, std::string_view text) {
    if (text.empty()) return;
    Token t;
    t.kind = TokenKind::text;
    t.text = std::string(text);
    t.pos = position(offset);
    tokens_.push_back(std::move(t));
  }

  void emit(TokenKind kind, size_t offset, std::string text = {}) {
    Token t;
    t.kind = kind;
    t.text = std::move(text);
    t.pos = position(offset);
    tokens_.push_back(std::move(t));
  }

  // After a block or comment end: `-` strips all whitespace, `+` keeps it, trim_blocks drops
  // one newline.
  size_t after_block_end(size_t pos, char control) const {
    if (control == '-') return skip_space(src_, pos);
    if (control != '+' && options_.trim_blocks && pos < src_.size() && src_[pos] == '\n') {
      return pos + 1;
    }
    return pos;
  }

  size_t lex_comment(size_t start, size_t p) {
    const size_t end = src_.find("#}", p);
    if (end == std::string::npos) error(start, "missing end of comment tag");
    char control = 0;
    if (end > p && (src_[end - 1] == '-' || src_[end - 1] == '+')) control = src_[end - 1];
    return after_block_end(end + 2, control);
  }

  // `{% raw %}...{% endraw %}`: the body is text, whitespace control applies at both tags.
  bool try_raw(size_t start, size_t p, size_t& pos) {
    size_t q = skip_space(src_, p);
    if (src_.compare(q, 3, "raw") != 0 || (q + 3 < src_.size() && is_name_char(src_[q + 3]))) {
      return false;
    }
    q = skip_space(src_, q + 3);
    size_t body;
    if (src_.compare(q, 3, "-%}") == 0) {
      body = skip_space(src_, q + 3);
    } else if (src_.compare(q, 2, "%}") == 0) {
      body = q + 2;  // jinja applies no trim_blocks after {% raw %}
    } else {
      return false;
    }
    const bool line_starting = body > 0 && src_[body - 1] == '\n';
    size_t search = body;
    while (true) {
      const size_t tag = src_.find("{%", search);
      if (tag == std::string::npos) error(start, "missing end of raw directive");
      size_t r = tag + 2;
      char control = 0;
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) control = src_[r++];
      r = skip_space(src_, r);
      if (src_.compare(r, 6, "endraw") != 0) {
        search = tag + 2;
        continue;
      }
      r = skip_space(src_, r + 6);
      char end_control = 0;
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) end_control = src_[r++];
      if (src_.compare(r, 2, "%}") != 0) {
        search = tag + 2;
        continue;
      }
      std::string_view text = std::string_view(src_).substr(body, tag - body);
      if (control == '-') {
        text = text.substr(0, rstrip_length(text));
      } else if (control != '+' && options_.lstrip_blocks) {
        text = lstrip_before_tag(text, line_starting);
      }
      emit_text(body, text);
      pos = after_block_end(r + 2, end_control);
      return true;
    }
  }

  size_t lex_tag(size_t start, size_t p, bool variable) {
    emit(variable ? TokenKind::variable_begin : TokenKind::block_begin, start);
    std::vector<std::pair<char, size_t>> open;  // open brackets and where they opened
    while (true) {
      p = skip_space(src_, p);
      if (p >= src_.size()) {
        error(start, "unexpected end of template: the {} is not closed",
              variable ? "'{{'" : "'{%'");
      }
      if (open.empty()) {
        if (variable) {
          if (src_.compare(p, 3, "-}}") == 0) {
            emit(TokenKind::variable_end, p);
            return skip_space(src_, p + 3);
          }
          if (src_.compare(p, 2, "}}") == 0) {
            emit(TokenKind::variable_end, p);
            return p + 2;
          }
        } else {
          if ((src_[p] == '-' || src_[p] == '+') && src_.compare(p + 1, 2, "%}") == 0) {
            emit(TokenKind::block_end, p);
            return after_block_end(p + 3, src_[p]);
          }
          if (src_.compare(p, 2, "%}") == 0) {
            emit(TokenKind::block_end, p);
            return after_block_end(p + 2, 0);
          }
        }
      }
      const char c = src_[p];
      if (c == '\'' || c == '"') {
        p = lex_string(p);
      } else if (is_digit(c)) {
        p = lex_number(p);
      } else if (is_name_start(c)) {
        size_t e = p;
        while (e < src_.size() && is_name_char(src_[e])) ++e;
        emit(TokenKind::name, p, src_.substr(p, e - p));
        p = e;
      } else {
        p = lex_operator(p, open);
      }
    }
  }

  size_t lex_operator(size_t p, std::vector<std::pair<char, size_t>>& open) {
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (std::string_view op : kTwo) {
      if (src_.compare(p, 2, op) == 0) {
        emit(TokenKind::op, p, std::string(op));
        return p + 2;
      }
    }
    const char c = src_[p];
    static constexpr std::string_view kOne = "+-/*%~[](){}<>=.:|,;";
    if (kOne.find(c) == std::string_view::npos) {
      if (c == '!') error(p, "unexpected '!' (use 'not' for negation)");
      error(p, "unexpected character '{}'", std::string(1, c));
    }
    if (c == '(' || c == '[' || c == '{') {
      open.emplace_back(c, p);
    } else if (c == ')' || c == ']' || c == '}') {
      const char expected_open = c == ')' ? '(' : c == ']' ? '[' : '{';
      if (open.empty()) error(p, "unexpected '{}'", std::string(1, c));
      if (open.back().first != expected_open) {
        const char want = open.back().first == '(' ? ')' : open.back().first == '[' ? ']' : '}';
        error(p, "unexpected '{}', expected '{}'", std::string(1, c), std::string(1, want));
      }
      open.pop_back();
    }
    emit(TokenKind::op, p, std::string(1, c));
    return p + 1;
  }

  // A quoted literal, decoded as Python's "unicode-escape" codec does.
  size_t lex_string(size_t start) {
    const char quote = src_[start];
    std::string value;
    size_t p = start + 1;
    while (true) {
      if (p >= src_.size()) error(start, "unterminated string literal");
      const char c = src_[p];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        ++p;
        continue;
      }
      if (p + 1 >= src_.size()) error(start, "unterminated string literal");
      const char e = src_[p + 1];
      p += 2;
      switch (e) {
        case '\n':
          break;
        case '\\':
          value += '\\';
          break;
        case '\'':
          value += '\'';
          break;
        case '"':
          value += '"';
          break;
        case 'a':
          value += '\a';
          break;
        case 'b':
          value += '\b';
          break;
        case 'f':
          value += '\f';
          break;
        case 'n':
          value += '\n';
          break;
        case 'r':
          value += '\r';
          break;
        case 't':
          value += '\t';
          break;
        case 'v':
          value += '\v';
          break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          char32_t cp = 0;
          for (size_t k = 0; k < digits; ++k) {
            const int h = p + k < src_.size() ? hex_value(src_[p + k]) : -1;
            if (h < 0)
              error(p - 2, "truncated \\{}{} escape in string literal", std::string(1, e),
                    std::string(digits, 'X'));
            cp = cp * 16 + static_cast<char32_t>(h);
          }
          if (cp > 0x10FFFF) error(p - 2, "illegal Unicode character in string literal");
          p += digits;
          unicode::append_utf8(value, cp);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            char32_t cp = static_cast<char32_t>(e - '0');
            for (int k = 0; k < 2 && p < src_.size() && src_[p] >= '0' && src_[p] <= '7'; ++k) {
              cp = cp * 8 + static_cast<char32_t>(src_[p++] - '0');
            }
            unicode::append_utf8(value, cp);
          } else {
            value += '\\';  // unknown escapes stay as written
            p -= 1;
          }
          break;
      }
    }
    Token t;
    t.kind = TokenKind::string;
    t.text = std::move(value);
    t.pos = position(start);
    tokens_.push_back(std::move(t));
    return p + 1;
  }

  size_t lex_number(size_t start) {
    size_t p = start;
    const auto digits = [&](auto accept) {
      while (p < src_.size() &&
             (accept(src_[p]) || (src_[p] == '_' && p + 1 < src_.size() && accept(src_[p + 1])))) {
        ++p;
      }
    };
    const auto decimal = [](char c) { return is_digit(c); };
    Token t;
    t.pos = position(start);
    if (src_[p] == '0' && p + 1 < src_.size() &&
        std::string_view("xXoObB").find(src_[p + 1]) != std::string_view::npos) {
      const char prefix = static_cast<char>(src_[p + 1] | 0x20);
      const int base = prefix == 'x' ? 16 : prefix == 'o' ? 8 : 2;
      p += 2;
      const size_t body = p;
      digits([&](char c) {
        const int h = hex_value(c);
        return h >= 0 && h < base;
      });
      if (p == body) error(start, "invalid number literal");
      t.kind = TokenKind::integer;
      t.int_value = parse_int(start, src_.substr(body, p - body), base);
    } else {
      digits(decimal);
      bool is_float = false;
      // `foo.0.1` is two item accesses, not foo . 0.1 (jinja's float rule has (?<!\.)).
      const bool after_dot = start > 0 && src_[start - 1] == '.';
      if (!after_dot && p + 1 < src_.size() && src_[p] == '.' && is_digit(src_[p + 1])) {
        ++p;
        digits(decimal);
        is_float = true;
      }
      if (!after_dot && p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
        size_t q = p + 1;
        if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
        if (q < src_.size() && is_digit(src_[q])) {
          p = q;
          digits(decimal);
          is_float = true;
        }
      }
      std::string text;
      for (size_t i = start; i < p; ++i) {
        if (src_[i] != '_') text += src_[i];
      }
      if (is_float) {
        t.kind = TokenKind::floating;
        t.float_value = std::strtod(text.c_str(), nullptr);
      } else {
        t.kind = TokenKind::integer;
        t.int_value = parse_int(start, text, 10);
      }
    }
    tokens_.push_back(std::move(t));
    return p;
  }

  int64_t parse_int(size_t start, std::string_view text, int base) const {
    std::string clean;
    for (char c : text) {
      if (c != '_') clean += c;
    }
    int64_t value = 0;
    const auto result = std::from_chars(clean.data(), clean.data() + clean.size(), value, base);
    if (result.ec != std::errc() || result.ptr != clean.data() + clean.size()) {
      error(start, "integer literal out of range");
    }
    return value;
  }

  std::string src_;
  LexerOptions options_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexerOptions& options) {
  return Lexer(source, options).run();
}

std::string describe(const Token& token) {
  switch (token.kind) {
    case TokenKind::text:
      return "template text";
    case TokenKind::variable_begin:
      return "'{{'";
    case TokenKind::variable_end:
      return "end of print statement '}}'";
    case TokenKind::block_begin:
      return "'{%'";
    case TokenKind::block_end:
      return "end of statement block '%}'";
    case TokenKind::name:
      return "'" + token.text + "'";
    case TokenKind::string:
      return "string literal";
    case TokenKind::integer:
      return "integer literal";
    case TokenKind::floating:
      return "float literal";
    case TokenKind::op:
      return "'" + token.text + "'";
    case TokenKind::eof:
      return "end of template";
  }
  return "token";
}

}  // namespace strata::jinja
