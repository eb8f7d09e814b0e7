#include "template/jinja_value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "template/jinja_error.h"
#include "template/jinja_unicode.h"

namespace strata::jinja {

namespace {

constexpr int kMaxNesting = 512;  // repr/==/< over nested (possibly self-containing) containers

void check_depth(int depth) {
  if (depth > kMaxNesting) raise("value nested more than {} levels deep", kMaxNesting);
}

void append_repr(std::string& out, const Value& v, int depth);

void append_items(std::string& out, const List& items, int depth) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    append_repr(out, items[i], depth + 1);
  }
}

void append_dict(std::string& out, const Dict& d, int depth) {
  out += '{';
  bool first = true;
  for (const auto& [k, v] : d.entries) {
    if (!first) out += ", ";
    first = false;
    append_repr(out, k, depth + 1);
    out += ": ";
    append_repr(out, v, depth + 1);
  }
  out += '}';
}

void append_container(std::string& out, const Value& v, int depth) {
  check_depth(depth);
  switch (v.kind()) {
    case Value::Kind::list:
      out += '[';
      append_items(out, v.items(), depth);
      out += ']';
      return;
    case Value::Kind::tuple:
      out += '(';
      append_items(out, v.items(), depth);
      if (v.items().size() == 1) out += ',';
      out += ')';
      return;
    case Value::Kind::dict:
      append_dict(out, v.as_dict(), depth);
      return;
    case Value::Kind::namespace_object:
      out += "<Namespace ";
      append_dict(out, v.as_dict(), depth);
      out += '>';
      return;
    default:
      return;
  }
}

void append_repr(std::string& out, const Value& v, int depth) {
  switch (v.kind()) {
    case Value::Kind::undefined:
      out += "Undefined";
      return;
    case Value::Kind::string:
      out += python_string_repr(v.as_string());
      return;
    case Value::Kind::list:
    case Value::Kind::tuple:
    case Value::Kind::dict:
    case Value::Kind::namespace_object:
      append_container(out, v, depth);
      return;
    default:
      append_str(out, v);
      return;
  }
}

bool equals_at(const Value& a, const Value& b, int depth);

bool dict_equals(const Dict& a, const Dict& b, int depth) {
  if (a.size() != b.size()) return false;
  for (const auto& [k, v] : a.entries) {
    const Value* other = b.find(k);
    if (!other || !equals_at(v, *other, depth + 1)) return false;
  }
  return true;
}

bool equals_at(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() == b.as_int();
    return a.as_double() == b.as_double();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::undefined:
    case Value::Kind::none:
      return true;
    case Value::Kind::string:
      return a.as_string() == b.as_string();
    case Value::Kind::list:
    case Value::Kind::tuple: {
      const List& x = a.items();
      const List& y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!equals_at(x[i], y[i], depth + 1)) return false;
      }
      return true;
    }
    case Value::Kind::dict:
      return dict_equals(a.as_dict(), b.as_dict(), depth);
    default:
      return a.identity() == b.identity();
  }
}

int compare_at(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  if (a.is_undefined() || b.is_undefined()) {
    const Value& u = a.is_undefined() ? a : b;
    raise("{}", u.undefined_hint().empty() ? "value is undefined" : u.undefined_hint());
  }
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) {
      return a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
    }
    const double x = a.as_double(), y = b.as_double();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());  // UTF-8 byte order = code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
    const List& x = a.items();
    const List& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals_at(x[i], y[i], depth + 1)) return compare_at(x[i], y[i], depth + 1);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  raise("'<' not supported between instances of '{}' and '{}'", type_name(a), type_name(b));
}

}  // namespace

Value Value::undefined(std::string hint) {
  Value v;
  if (!hint.empty()) v.data_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::none;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::boolean;
  v.data_ = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::integer;
  v.data_ = i;
  return v;
}

Value Value::floating(double d) {
  Value v;
  v.kind_ = Kind::floating;
  v.data_ = d;
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::string;
  v.data_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::list(List items) {
  Value v;
  v.kind_ = Kind::list;
  v.data_ = std::make_shared<List>(std::move(items));
  return v;
}

Value Value::tuple(List items) {
  Value v;
  v.kind_ = Kind::tuple;
  v.data_ = std::make_shared<List>(std::move(items));
  return v;
}

Value Value::dict() {
  return dict(std::make_shared<Dict>());
}

Value Value::dict(std::shared_ptr<Dict> d) {
  Value v;
  v.kind_ = Kind::dict;
  v.data_ = std::move(d);
  return v;
}

Value Value::namespace_object(std::shared_ptr<Dict> d) {
  Value v;
  v.kind_ = Kind::namespace_object;
  v.data_ = std::move(d);
  return v;
}

Value Value::function(std::shared_ptr<const Function> f) {
  Value v;
  v.kind_ = Kind::function;
  v.data_ = std::move(f);
  return v;
}

int64_t Value::as_int() const {
  if (kind_ == Kind::boolean) return std::get<bool>(data_) ? 1 : 0;
  return std::get<int64_t>(data_);
}

double Value::as_double() const {
  if (kind_ == Kind::floating) return std::get<double>(data_);
  return static_cast<double>(as_int());
}

const std::string& Value::undefined_hint() const {
  static const std::string empty;
  if (kind_ != Kind::undefined || data_.index() == 0) return empty;
  return *std::get<std::shared_ptr<const std::string>>(data_);
}

const void* Value::identity() const {
  switch (kind_) {
    case Kind::list:
    case Kind::tuple:
      return std::get<std::shared_ptr<List>>(data_).get();
    case Kind::dict:
    case Kind::namespace_object:
      return std::get<std::shared_ptr<Dict>>(data_).get();
    case Kind::function:
      return std::get<std::shared_ptr<const Function>>(data_).get();
    default:
      return nullptr;
  }
}

const Value* Dict::find(std::string_view key) const {
  const auto it = string_index_.find(key);
  return it == string_index_.end() ? nullptr : &entries[it->second].second;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.as_string()));
  for (const auto& [k, v] : entries) {
    if (!k.is_string() && equals(k, key)) return &v;
  }
  return nullptr;
}

void Dict::set(std::string_view key, Value value) {
  const auto it = string_index_.find(key);
  if (it != string_index_.end()) {
    entries[it->second].second = std::move(value);
    return;
  }
  string_index_.emplace(std::string(key), entries.size());
  entries.emplace_back(Value::string(std::string(key)), std::move(value));
}

void Dict::set(const Value& key, Value value) {
  if (key.is_string()) return set(std::string_view(key.as_string()), std::move(value));
  for (auto& [k, v] : entries) {
    if (!k.is_string() && equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(key, std::move(value));
}

void Dict::clear() {
  entries.clear();
  string_index_.clear();
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined:
    case Value::Kind::none:
      return false;
    case Value::Kind::boolean:
      return v.as_bool();
    case Value::Kind::integer:
      return v.as_int() != 0;
    case Value::Kind::floating:
      return v.as_double() != 0.0;
    case Value::Kind::string:
      return !v.as_string().empty();
    case Value::Kind::list:
    case Value::Kind::tuple:
      return !v.items().empty();
    case Value::Kind::dict:
      return v.as_dict().size() != 0;
    default:
      return true;
  }
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined:
      return "Undefined";
    case Value::Kind::none:
      return "NoneType";
    case Value::Kind::boolean:
      return "bool";
    case Value::Kind::integer:
      return "int";
    case Value::Kind::floating:
      return "float";
    case Value::Kind::string:
      return "str";
    case Value::Kind::list:
      return "list";
    case Value::Kind::tuple:
      return "tuple";
    case Value::Kind::dict:
      return "dict";
    case Value::Kind::namespace_object:
      return "Namespace";
    case Value::Kind::function:
      return "function";
  }
  return "object";
}

std::string python_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view s(buf, static_cast<size_t>(result.ptr - buf));  // [-]D[.DDD]e(+|-)XX
  std::string out;
  if (s.front() == '-') {
    out += '-';
    s.remove_prefix(1);
  }
  const size_t e = s.find('e');
  std::string digits(1, s[0]);
  if (e > 1) digits.append(s.substr(2, e - 2));
  int exponent = 0;
  for (size_t i = e + 2; i < s.size(); ++i) exponent = exponent * 10 + (s[i] - '0');
  if (s[e + 1] == '-') exponent = -exponent;
  const int n = static_cast<int>(digits.size());
  if (exponent >= -4 && exponent < 16) {
    if (exponent >= 0) {
      if (n <= exponent + 1) {
        out += digits;
        out.append(static_cast<size_t>(exponent + 1 - n), '0');
        out += ".0";
      } else {
        out.append(digits, 0, static_cast<size_t>(exponent + 1));
        out += '.';
        out.append(digits, static_cast<size_t>(exponent + 1));
      }
    } else {
      out += "0.";
      out.append(static_cast<size_t>(-exponent - 1), '0');
      out += digits;
    }
  } else {
    out += digits[0];
    if (n > 1) {
      out += '.';
      out.append(digits, 1);
    }
    out += exponent < 0 ? "e-" : "e+";
    const int magnitude = std::abs(exponent);
    if (magnitude < 10) out += '0';
    out += std::to_string(magnitude);
  }
  return out;
}

std::string python_string_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t cp : unicode::decode(s)) {
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (unicode::is_printable(cp)) {
      unicode::append_utf8(out, cp);
    } else {
      char buf[16];
      if (cp >= 0xDC80 && cp <= 0xDCFF) {
        std::snprintf(buf, sizeof buf, "\\udc%02x", static_cast<unsigned>(cp - 0xDC00));
      } else if (cp <= 0xFF) {
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(cp));
      } else if (cp <= 0xFFFF) {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      } else {
        std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(cp));
      }
      out += buf;
    }
  }
  out += quote;
  return out;
}

void append_str(std::string& out, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined:
      return;
    case Value::Kind::none:
      out += "None";
      return;
    case Value::Kind::boolean:
      out += v.as_bool() ? "True" : "False";
      return;
    case Value::Kind::integer:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::floating:
      out += python_float_repr(v.as_double());
      return;
    case Value::Kind::string:
      out += v.as_string();
      return;
    case Value::Kind::function:
      out += "<function " + v.as_function().name + ">";
      return;
    default:
      append_container(out, v, 0);
      return;
  }
}

std::string to_str(const Value& v) {
  if (v.is_string()) return v.as_string();
  std::string out;
  append_str(out, v);
  return out;
}

std::string repr(const Value& v) {
  std::string out;
  append_repr(out, v, 0);
  return out;
}

bool equals(const Value& a, const Value& b) {
  return equals_at(a, b, 0);
}

int compare(const Value& a, const Value& b) {
  return compare_at(a, b, 0);
}

}  // namespace strata::jinja
