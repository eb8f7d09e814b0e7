#include "template/jinja_strings.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "template/jinja_builtins.h"
#include "template/jinja_error.h"
#include "template/jinja_unicode.h"

namespace strata::jinja::strings {

namespace {

bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

std::string encode_range(const std::u32string& s, size_t begin, size_t end) {
  return unicode::encode(std::u32string_view(s).substr(begin, end - begin));
}

}  // namespace

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right) {
  const std::u32string text = unicode::decode(s);
  std::u32string set;
  if (chars) set = unicode::decode(*chars);
  const auto strip_it = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : unicode::is_space(c);
  };
  size_t begin = 0, end = text.size();
  if (left) {
    while (begin < end && strip_it(text[begin])) ++begin;
  }
  if (right) {
    while (end > begin && strip_it(text[end - 1])) --end;
  }
  if (begin == 0 && end == text.size()) return std::string(s);
  return encode_range(text, begin, end);
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) raise("empty separator");
    size_t pos = 0;
    for (int64_t count = 0; maxsplit < 0 || count < maxsplit; ++count) {
      const size_t idx = s.find(*sep, pos);
      if (idx == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, idx - pos));
      pos = idx + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  const std::u32string text = unicode::decode(s);
  size_t i = 0;
  const size_t n = text.size();
  while (i < n && unicode::is_space(text[i])) ++i;
  int64_t count = 0;
  while (i < n) {
    if (maxsplit >= 0 && count == maxsplit) {
      out.push_back(encode_range(text, i, n));
      break;
    }
    size_t j = i;
    while (j < n && !unicode::is_space(text[j])) ++j;
    out.push_back(encode_range(text, i, j));
    ++count;
    i = j;
    while (i < n && unicode::is_space(text[i])) ++i;
  }
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) raise("empty separator");
    size_t end = s.size();
    for (int64_t count = 0; maxsplit < 0 || count < maxsplit; ++count) {
      if (end < sep->size()) break;
      const size_t idx = s.rfind(*sep, end - sep->size());
      if (idx == std::string_view::npos) break;
      out.emplace_back(s.substr(idx + sep->size(), end - idx - sep->size()));
      end = idx;
    }
    out.emplace_back(s.substr(0, end));
    std::reverse(out.begin(), out.end());
    return out;
  }
  const std::u32string text = unicode::decode(s);
  size_t j = text.size();
  while (j > 0 && unicode::is_space(text[j - 1])) --j;
  int64_t count = 0;
  while (j > 0) {
    if (maxsplit >= 0 && count == maxsplit) {
      out.push_back(encode_range(text, 0, j));
      break;
    }
    size_t i = j;
    while (i > 0 && !unicode::is_space(text[i - 1])) --i;
    out.push_back(encode_range(text, i, j));
    ++count;
    j = i;
    while (j > 0 && unicode::is_space(text[j - 1])) --j;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  const std::u32string text = unicode::decode(s);
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (!is_line_break(text[i])) continue;
    size_t end = i + 1;
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') end = i + 2;
    out.push_back(encode_range(text, start, keepends ? end : i));
    start = end;
    i = end - 1;
  }
  if (start < text.size()) out.push_back(encode_range(text, start, text.size()));
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view replacement,
                    int64_t count, size_t max_bytes) {
  std::string out;
  const auto check = [&] {
    if (out.size() > max_bytes) raise("string longer than {} bytes", max_bytes);
  };
  if (old.empty()) {
    const std::u32string text = unicode::decode(s);
    int64_t done = 0;
    for (size_t i = 0; i <= text.size(); ++i) {
      if (count < 0 || done < count) {
        out += replacement;
        ++done;
      }
      if (i < text.size()) unicode::append_utf8(out, text[i]);
      check();
    }
    return out;
  }
  size_t pos = 0;
  for (int64_t done = 0; count < 0 || done < count; ++done) {
    const size_t idx = s.find(old, pos);
    if (idx == std::string_view::npos) break;
    out.append(s.substr(pos, idx - pos));
    out.append(replacement);
    pos = idx + old.size();
    check();
  }
  out.append(s.substr(pos));
  check();
  return out;
}

std::string title(std::string_view s) {
  std::string out;
  bool previous_cased = false;
  for (char32_t c : unicode::decode(s)) {
    if (previous_cased) {
      unicode::append_utf8(out, unicode::to_lower(c));
    } else {
      unicode::append_title(out, c);
    }
    previous_cased = unicode::is_cased(c);
  }
  return out;
}

std::string title_filter(std::string_view s) {
  const auto is_delimiter = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || unicode::is_space(c);
  };
  std::string out;
  bool word_start = true;
  for (char32_t c : unicode::decode(s)) {
    if (is_delimiter(c)) {
      unicode::append_utf8(out, c);
      word_start = true;
    } else {
      if (word_start) {
        unicode::append_upper(out, c);  // jinja's |title uses str.upper() on the first letter
      } else {
        unicode::append_utf8(out, unicode::to_lower(c));
      }
      word_start = false;
    }
  }
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out;
  bool first = true;
  for (char32_t c : unicode::decode(s)) {
    if (first) {
      unicode::append_title(out, c);
    } else {
      unicode::append_utf8(out, unicode::to_lower(c));
    }
    first = false;
  }
  return out;
}

std::string swapcase(std::string_view s) {
  std::string out;
  for (char32_t c : unicode::decode(s)) {
    if (unicode::is_upper(c)) {
      c = unicode::to_lower(c);
    } else if (unicode::is_lower(c)) {
      c = unicode::to_upper(c);
    }
    unicode::append_utf8(out, c);
  }
  return out;
}

bool all_chars(std::string_view s, bool (*predicate)(char32_t)) {
  if (s.empty()) return false;
  for (char32_t c : unicode::decode(s)) {
    if (!predicate(c)) return false;
  }
  return true;
}

bool cased_check(std::string_view s, bool upper) {
  bool any_cased = false;
  for (char32_t c : unicode::decode(s)) {
    if (upper ? unicode::is_lower(c) : unicode::is_upper(c)) return false;
    if (unicode::is_cased(c)) any_cased = true;
  }
  return any_cased;
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string pad(std::string_view s, int64_t width, char align, char32_t fill) {
  const int64_t len = static_cast<int64_t>(unicode::length(s));
  if (width <= len) return std::string(s);
  const int64_t total = width - len;
  const int64_t left = align == '>' ? total : align == '^' ? total / 2 : 0;
  std::string out;
  for (int64_t i = 0; i < left; ++i) unicode::append_utf8(out, fill);
  out += s;
  for (int64_t i = left; i < total; ++i) unicode::append_utf8(out, fill);
  return out;
}

namespace {

std::string c_format(const std::string& spec, auto value) {
  char buf[512];
  const int n = std::snprintf(buf, sizeof buf, spec.c_str(), value);
  if (n < 0 || n >= static_cast<int>(sizeof buf)) raise("formatted number too wide");
  return std::string(buf, static_cast<size_t>(n));
}

int64_t int_operand(const Value& v, char conversion) {
  if (v.is_integral()) return v.as_int();
  if (v.is_float() && conversion != 'x' && conversion != 'X' && conversion != 'o') {
    const double d = v.as_double();
    if (!std::isfinite(d) || std::fabs(d) > 9.2e18)
      raise("cannot convert float {} to integer", python_float_repr(d));
    return static_cast<int64_t>(d);
  }
  raise("%{} format: a real number is required, not {}", std::string(1, conversion), type_name(v));
}

double float_operand(const Value& v, char conversion) {
  if (v.is_number()) return v.as_double();
  raise("%{} format: a real number is required, not {}", std::string(1, conversion), type_name(v));
}

// Python spells infinities and NaN without the C library's variations.
// C prints a negative NaN as "-nan"; Python prints "nan".
std::string fix_special(std::string s) {
  for (std::string_view negative_nan : {"-nan", "-NAN"}) {
    const size_t p = s.find(negative_nan);
    if (p != std::string::npos) s.erase(p, 1);
  }
  return s;
}

}  // namespace

std::string percent_format(std::string_view format, const Value& args) {
  std::vector<Value> positional;
  const Dict* mapping = nullptr;
  if (args.is_tuple()) {
    positional = args.items();
  } else {
    if (args.is_dict()) mapping = &args.as_dict();
    positional.push_back(args);
  }
  size_t next = 0;
  bool used_mapping = false;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (++i >= format.size()) raise("incomplete format");
    if (format[i] == '%') {
      out += '%';
      continue;
    }
    const Value* arg = nullptr;
    if (format[i] == '(') {
      const size_t close = format.find(')', i);
      if (close == std::string_view::npos) raise("incomplete format key");
      if (!mapping) raise("format requires a mapping");
      const std::string key(format.substr(i + 1, close - i - 1));
      arg = mapping->find(std::string_view(key));
      if (!arg) raise("KeyError: '{}'", key);
      used_mapping = true;
      i = close + 1;
    }
    std::string flags;
    while (i < format.size() &&
           std::string_view("-+ #0").find(format[i]) != std::string_view::npos) {
      flags += format[i++];
    }
    std::string width, precision;
    while (i < format.size() && format[i] >= '0' && format[i] <= '9') width += format[i++];
    bool has_precision = false;
    if (i < format.size() && format[i] == '.') {
      has_precision = true;
      ++i;
      while (i < format.size() && format[i] >= '0' && format[i] <= '9') precision += format[i++];
    }
    while (i < format.size() && (format[i] == 'h' || format[i] == 'l' || format[i] == 'L')) ++i;
    if (i >= format.size()) raise("incomplete format");
    const char conversion = format[i];
    if (!arg) {
      if (next >= positional.size()) raise("not enough arguments for format string");
      arg = &positional[next++];
    }
    const std::string spec_prefix = "%" + flags + width + (has_precision ? "." + precision : "");
    std::string piece;
    switch (conversion) {
      case 's':
      case 'r':
      case 'a': {
        piece = conversion == 's' ? to_str(*arg) : repr(*arg);
        if (has_precision) {
          const size_t keep = precision.empty() ? 0 : std::stoul(precision);
          const std::u32string cps = unicode::decode(piece);
          if (cps.size() > keep) piece = unicode::encode(std::u32string_view(cps).substr(0, keep));
        }
        const int64_t w = width.empty() ? 0 : std::stoll(width);
        piece = pad(piece, w, flags.find('-') != std::string::npos ? '<' : '>');
        break;
      }
      case 'd':
      case 'i':
      case 'u':
        piece =
            c_format(spec_prefix + "lld", static_cast<long long>(int_operand(*arg, conversion)));
        break;
      case 'x':
      case 'X':
      case 'o': {
        const int64_t v = int_operand(*arg, conversion);
        std::string body = c_format(spec_prefix + "ll" + std::string(1, conversion),
                                    static_cast<unsigned long long>(v < 0 ? -v : v));
        if (v < 0) body.insert(body.find_first_not_of(' '), "-");
        if (conversion == 'o' && flags.find('#') != std::string::npos) {
          const size_t z = body.find("0");
          if (z != std::string::npos) body.insert(z + 1, "o");
        }
        piece = body;
        break;
      }
      case 'e':
      case 'E':
      case 'f':
      case 'F':
      case 'g':
      case 'G':
        piece = fix_special(
            c_format(spec_prefix + std::string(1, conversion), float_operand(*arg, conversion)));
        break;
      case 'c': {
        if (arg->is_string() && unicode::length(arg->as_string()) == 1) {
          piece = arg->as_string();
        } else if (arg->is_integral()) {
          unicode::append_utf8(piece, static_cast<char32_t>(arg->as_int()));
        } else {
          raise("%c requires an int or a unicode character");
        }
        break;
      }
      default:
        raise("unsupported format character '{}'", std::string(1, conversion));
    }
    out += piece;
  }
  if (!used_mapping && !mapping && next < positional.size()) {
    raise("not all arguments converted during string formatting");
  }
  return out;
}

namespace {

std::string group_digits(const std::string& digits, char separator) {
  std::string out;
  const size_t n = digits.size();
  for (size_t i = 0; i < n; ++i) {
    if (i && (n - i) % 3 == 0) out += separator;
    out += digits[i];
  }
  return out;
}

// format(value, spec) for the common parts of Python's format-spec mini-language.
std::string format_with_spec(const Value& v, std::string_view spec) {
  if (spec.empty()) return to_str(v);
  size_t i = 0;
  char32_t fill = ' ';
  char align = 0;
  const std::u32string s32 = unicode::decode(spec);
  const auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  size_t skip_bytes = 0;
  if (s32.size() >= 2 && is_align(s32[1])) {
    fill = s32[0];
    align = static_cast<char>(s32[1]);
    std::string f;
    unicode::append_utf8(f, fill);
    skip_bytes = f.size() + 1;
  } else if (!s32.empty() && is_align(s32[0])) {
    align = static_cast<char>(s32[0]);
    skip_bytes = 1;
  }
  i = skip_bytes;
  char sign = '-';
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) sign = spec[i++];
  bool alternate = false;
  if (i < spec.size() && spec[i] == '#') {
    alternate = true;
    ++i;
  }
  if (i < spec.size() && spec[i] == '0') {
    if (!align) {
      fill = '0';
      align = '=';
    }
    ++i;
  }
  int64_t width = 0;
  while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9')
    width = width * 10 + (spec[i++] - '0');
  char grouping = 0;
  if (i < spec.size() && (spec[i] == ',' || spec[i] == '_')) grouping = spec[i++];
  int precision = -1;
  if (i < spec.size() && spec[i] == '.') {
    ++i;
    precision = 0;
    while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9')
      precision = precision * 10 + (spec[i++] - '0');
  }
  char type = 0;
  if (i < spec.size()) type = spec[i++];
  if (i != spec.size()) raise("Invalid format specifier '{}'", spec);

  std::string body;
  std::string prefix;  // sign
  if (v.is_string() || (!v.is_number() && (type == 0 || type == 's'))) {
    if (type != 0 && type != 's')
      raise("Unknown format code '{}' for object of type '{}'", std::string(1, type), type_name(v));
    body = to_str(v);
    if (precision >= 0) {
      const std::u32string cps = unicode::decode(body);
      if (cps.size() > static_cast<size_t>(precision))
        body = unicode::encode(std::u32string_view(cps).substr(0, static_cast<size_t>(precision)));
    }
    return pad(body, width, align ? (align == '=' ? '<' : align) : '<', fill);
  }
  if (!v.is_number()) raise("unsupported format string passed to {}.__format__", type_name(v));
  const bool integral = v.is_integral() && (type == 0 || std::string_view("dnboxXc").find(type) !=
                                                             std::string_view::npos);
  if (v.is_bool() && type == 0) return pad(to_str(v), width, align ? align : '<', fill);
  if (integral) {
    const int64_t n = v.as_int();
    const uint64_t mag = n < 0 ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
    if (type == 'c') {
      unicode::append_utf8(body, static_cast<char32_t>(n));
    } else if (type == 'x' || type == 'X' || type == 'o' || type == 'b') {
      const int base = type == 'o' ? 8 : type == 'b' ? 2 : 16;
      uint64_t m = mag;
      do {
        const int d = static_cast<int>(m % static_cast<uint64_t>(base));
        body.insert(body.begin(),
                    static_cast<char>(d < 10 ? '0' + d : (type == 'X' ? 'A' : 'a') + d - 10));
        m /= static_cast<uint64_t>(base);
      } while (m);
      if (alternate)
        body.insert(0, type == 'o' ? "0o" : type == 'b' ? "0b" : type == 'X' ? "0X" : "0x");
    } else {
      body = std::to_string(mag);
      if (grouping) body = group_digits(body, grouping);
    }
    if (n < 0) prefix = "-";
  } else {
    if (v.is_integral() && type == 0) type = 'd';
    double d = v.as_double();
    const bool negative = std::signbit(d) && !std::isnan(d);
    d = std::fabs(d);
    const bool percent = type == '%';
    if (percent) d *= 100;
    if (std::isinf(d) || std::isnan(d)) {
      body = std::isnan(d) ? "nan" : "inf";
      if (type == 'E' || type == 'F' || type == 'G') body = std::isnan(d) ? "NAN" : "INF";
    } else if (type == 0 && precision < 0) {
      body = python_float_repr(d);
    } else {
      const char c = type == 0 ? 'g' : percent ? 'f' : type == 'n' ? 'g' : type;
      const int p = precision < 0 ? 6 : precision;
      body = c_format("%." + std::to_string(p) + std::string(1, c), d);
      if (type == 0 && body.find_first_of(".eEn") == std::string::npos) body += ".0";
    }
    if (grouping) {
      const size_t end = body.find_first_not_of("0123456789");
      body = group_digits(body.substr(0, end), grouping) +
             (end == std::string::npos ? "" : body.substr(end));
    }
    if (percent) body += '%';
    if (negative) prefix = "-";
  }
  if (prefix.empty() && sign == '+') prefix = "+";
  if (prefix.empty() && sign == ' ') prefix = " ";
  if (!align) align = '>';
  if (align == '=') {
    return prefix + pad(body, width - static_cast<int64_t>(prefix.size()), '>', fill);
  }
  return pad(prefix + body, width, align, fill);
}

}  // namespace

std::string str_format(std::string_view format, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    const char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      raise("Single '}}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = format.find('}', i);
    if (close == std::string_view::npos) raise("Single '{{' encountered in format string");
    std::string_view field = format.substr(i + 1, close - i - 1);
    i = close;
    std::string_view spec;
    char conversion = 0;
    if (const size_t colon = field.find(':'); colon != std::string_view::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    if (const size_t bang = field.find('!'); bang != std::string_view::npos) {
      if (bang + 2 != field.size()) raise("expected ':' after conversion specifier");
      conversion = field[bang + 1];
      field = field.substr(0, bang);
    }
    size_t end = field.find_first_of(".[");
    const std::string_view head = field.substr(0, end);
    Value value;
    if (head.empty() ||
        std::all_of(head.begin(), head.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t index = head.empty() ? auto_index++ : std::stoul(std::string(head));
      if (index >= args.positional.size())
        raise("Replacement index {} out of range for positional args tuple", index);
      value = args.positional[index];
    } else {
      bool found = false;
      for (const auto& [k, v] : args.keyword) {
        if (k == head) {
          value = v;
          found = true;
        }
      }
      if (!found) raise("KeyError: '{}'", head);
    }
    while (end != std::string_view::npos && end < field.size()) {
      if (field[end] == '.') {
        const size_t next = field.find_first_of(".[", end + 1);
        value = get_attribute(
            value, field.substr(end + 1, next == std::string_view::npos ? std::string_view::npos
                                                                        : next - end - 1));
        end = next;
      } else {
        const size_t close_bracket = field.find(']', end);
        if (close_bracket == std::string_view::npos) raise("Missing ']' in format string");
        const std::string key(field.substr(end + 1, close_bracket - end - 1));
        const bool numeric = !key.empty() && std::all_of(key.begin(), key.end(), [](char d) {
          return d >= '0' && d <= '9';
        });
        value = get_item(value, numeric ? Value::integer(std::stoll(key)) : Value::string(key));
        end = close_bracket + 1;
      }
    }
    if (conversion == 'r' || conversion == 'a') {
      value = Value::string(repr(value));
    } else if (conversion == 's') {
      value = Value::string(to_str(value));
    } else if (conversion != 0) {
      raise("Unknown conversion specifier {}", std::string(1, conversion));
    }
    out += format_with_spec(value, spec);
  }
  return out;
}

}  // namespace strata::jinja::strings
