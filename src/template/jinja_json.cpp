#include "template/jinja_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "template/jinja_error.h"
#include "template/jinja_unicode.h"

namespace strata::jinja {

namespace {

constexpr int kMaxJsonDepth = 512;

Value from_json_at(const nlohmann::ordered_json& json, int depth) {
  if (depth > kMaxJsonDepth)
    fail("chat template input nested more than {} levels deep", kMaxJsonDepth);
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
    case nlohmann::ordered_json::value_t::discarded:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::boolean(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::integer(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = json.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Value::floating(static_cast<double>(u));
      }
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::floating(json.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value::string(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(from_json_at(item, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto dict = std::make_shared<Dict>();
      for (const auto& [key, item] : json.items()) dict->set(key, from_json_at(item, depth + 1));
      return Value::dict(std::move(dict));
    }
    case nlohmann::ordered_json::value_t::binary:
      break;
  }
  fail("chat template input holds binary data, which templates cannot use");
}

class Dumper {
 public:
  explicit Dumper(const JsonDumpOptions& options) : options_(options) {
    item_separator_ = options.item_separator.value_or(options.indent ? "," : ", ");
  }

  void dump(const Value& v, int depth) {
    if (depth > kMaxJsonDepth)
      raise("tojson: value nested more than {} levels deep", kMaxJsonDepth);
    switch (v.kind()) {
      case Value::Kind::none:
        out_ += "null";
        return;
      case Value::Kind::boolean:
        out_ += v.as_bool() ? "true" : "false";
        return;
      case Value::Kind::integer:
        out_ += std::to_string(v.as_int());
        return;
      case Value::Kind::floating:
        out_ += float_text(v.as_double());
        return;
      case Value::Kind::string:
        string(v.as_string());
        return;
      case Value::Kind::list:
      case Value::Kind::tuple:
        list(v.items(), depth);
        return;
      case Value::Kind::dict:
        dict(v.as_dict(), depth);
        return;
      default:
        raise("Object of type {} is not JSON serializable", type_name(v));
    }
  }

  std::string take() { return std::move(out_); }

 private:
  static std::string float_text(double d) {
    if (std::isnan(d)) return "NaN";
    if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
    return python_float_repr(d);
  }

  void newline(int depth) {
    if (!options_.indent) return;
    out_ += '\n';
    for (int i = 0; i < depth; ++i) out_ += *options_.indent;
  }

  void list(const List& items, int depth) {
    if (items.empty()) {
      out_ += "[]";
      return;
    }
    out_ += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out_ += item_separator_;
      newline(depth + 1);
      dump(items[i], depth + 1);
    }
    newline(depth);
    out_ += ']';
  }

  void dict(const Dict& d, int depth) {
    if (d.size() == 0) {
      out_ += "{}";
      return;
    }
    std::vector<const std::pair<Value, Value>*> entries;
    for (const auto& entry : d.entries) entries.push_back(&entry);
    if (options_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(), [](const auto* a, const auto* b) {
        return compare(a->first, b->first) < 0;
      });
    }
    out_ += '{';
    bool first = true;
    for (const auto* entry : entries) {
      if (!first) out_ += item_separator_;
      first = false;
      newline(depth + 1);
      key(entry->first);
      out_ += options_.key_separator;
      dump(entry->second, depth + 1);
    }
    newline(depth);
    out_ += '}';
  }

  void key(const Value& k) {
    switch (k.kind()) {
      case Value::Kind::string:
        string(k.as_string());
        return;
      case Value::Kind::integer:
        string(std::to_string(k.as_int()));
        return;
      case Value::Kind::floating:
        string(float_text(k.as_double()));
        return;
      case Value::Kind::boolean:
        string(k.as_bool() ? "true" : "false");
        return;
      case Value::Kind::none:
        string("null");
        return;
      default:
        raise("keys must be str, int, float, bool or None, not {}", type_name(k));
    }
  }

  void escape(char32_t cp) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
    out_ += buf;
  }

  void string(std::string_view s) {
    out_ += '"';
    const bool ascii = unicode::is_ascii(s);
    const auto put = [&](char32_t cp) {
      switch (cp) {
        case '"':
          out_ += "\\\"";
          return;
        case '\\':
          out_ += "\\\\";
          return;
        case '\n':
          out_ += "\\n";
          return;
        case '\r':
          out_ += "\\r";
          return;
        case '\t':
          out_ += "\\t";
          return;
        case '\b':
          out_ += "\\b";
          return;
        case '\f':
          out_ += "\\f";
          return;
        default:
          break;
      }
      if (cp < 0x20 || (options_.ensure_ascii && cp == 0x7F)) {
        escape(cp);
      } else if (cp < 0x80 || !options_.ensure_ascii) {
        unicode::append_utf8(out_, cp);
      } else if (cp <= 0xFFFF) {
        escape(cp);
      } else {
        const char32_t v = cp - 0x10000;
        escape(0xD800 + (v >> 10));
        escape(0xDC00 + (v & 0x3FF));
      }
    };
    if (ascii || !options_.ensure_ascii) {
      // Byte-wise: multi-byte sequences pass through untouched (no escaping needed).
      for (char c : s) {
        const auto b = static_cast<unsigned char>(c);
        if (b >= 0x80) {
          out_ += c;
        } else {
          put(b);
        }
      }
    } else {
      for (char32_t cp : unicode::decode(s)) put(cp);
    }
    out_ += '"';
  }

  const JsonDumpOptions& options_;
  std::string item_separator_;
  std::string out_;
};

}  // namespace

Value from_json(const nlohmann::ordered_json& json) {
  return from_json_at(json, 0);
}

std::string json_dumps(const Value& value, const JsonDumpOptions& options) {
  Dumper dumper(options);
  dumper.dump(value, 0);
  return dumper.take();
}

}  // namespace strata::jinja
