#include "gguf/gguf_value.h"

#include <fmt/format.h>

#include <limits>

namespace strata {

std::string_view gguf_value_type_name(GgufValueType type) {
  switch (type) {
    case GgufValueType::u8:
      return "u8";
    case GgufValueType::i8:
      return "i8";
    case GgufValueType::u16:
      return "u16";
    case GgufValueType::i16:
      return "i16";
    case GgufValueType::u32:
      return "u32";
    case GgufValueType::i32:
      return "i32";
    case GgufValueType::f32:
      return "f32";
    case GgufValueType::boolean:
      return "bool";
    case GgufValueType::string:
      return "string";
    case GgufValueType::array:
      return "array";
    case GgufValueType::u64:
      return "u64";
    case GgufValueType::i64:
      return "i64";
    case GgufValueType::f64:
      return "f64";
  }
  return "unknown";
}

GgufValue GgufValue::string_array(const std::vector<std::string>& items) {
  std::vector<GgufValue> values;
  values.reserve(items.size());
  for (const auto& s : items) values.push_back(GgufValue::string(s));
  return array(GgufValueType::string, std::move(values));
}

bool GgufValue::is_integer() const {
  switch (type()) {
    case GgufValueType::u8:
    case GgufValueType::i8:
    case GgufValueType::u16:
    case GgufValueType::i16:
    case GgufValueType::u32:
    case GgufValueType::i32:
    case GgufValueType::u64:
    case GgufValueType::i64:
      return true;
    default:
      return false;
  }
}

std::optional<int64_t> GgufValue::as_int() const {
  if (!is_integer()) return std::nullopt;
  if (type() == GgufValueType::u64) {
    const uint64_t v = std::get<uint64_t>(storage_);
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(v);
  }
  return std::visit(
      [](const auto& v) -> int64_t {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          return static_cast<int64_t>(v);
        } else {
          return 0;
        }
      },
      storage_);
}

std::optional<uint64_t> GgufValue::as_uint() const {
  if (type() == GgufValueType::u64) return std::get<uint64_t>(storage_);
  const auto v = as_int();
  if (!v || *v < 0) return std::nullopt;
  return static_cast<uint64_t>(*v);
}

std::optional<double> GgufValue::as_double() const {
  if (type() == GgufValueType::f32) return std::get<float>(storage_);
  if (type() == GgufValueType::f64) return std::get<double>(storage_);
  if (type() == GgufValueType::u64) return static_cast<double>(std::get<uint64_t>(storage_));
  if (const auto v = as_int()) return static_cast<double>(*v);
  return std::nullopt;
}

std::optional<bool> GgufValue::as_bool() const {
  if (const bool* b = std::get_if<bool>(&storage_)) return *b;
  return std::nullopt;
}

std::string GgufValue::to_display_string(size_t max_items) const {
  switch (type()) {
    case GgufValueType::string: {
      const std::string& s = *as_string();
      std::string shown = s.size() > 120 ? s.substr(0, 117) + "..." : s;
      for (char& c : shown) {
        if (c == '\n' || c == '\r' || c == '\t') c = ' ';
      }
      return fmt::format("\"{}\"", shown) +
             (s.size() > 120 ? fmt::format(" ({} bytes)", s.size()) : "");
    }
    case GgufValueType::boolean:
      return *as_bool() ? "true" : "false";
    case GgufValueType::f32:
      return fmt::format("{}", std::get<float>(storage_));
    case GgufValueType::f64:
      return fmt::format("{}", std::get<double>(storage_));
    case GgufValueType::u64:
      return fmt::format("{}", std::get<uint64_t>(storage_));
    case GgufValueType::array: {
      const GgufArray& a = *as_array();
      std::string out = "[";
      const size_t shown = std::min(max_items, a.items.size());
      for (size_t i = 0; i < shown; ++i) {
        if (i) out += ", ";
        out += a.items[i].to_display_string(max_items);
      }
      if (shown < a.items.size()) {
        out += fmt::format(", ... ({} {} items)", a.items.size(),
                           gguf_value_type_name(a.element_type));
      }
      return out + "]";
    }
    default:
      return fmt::format("{}", *as_int());
  }
}

bool GgufValue::operator==(const GgufValue& other) const {
  return storage_ == other.storage_;
}

bool operator==(const GgufArray& a, const GgufArray& b) {
  return a.element_type == b.element_type && a.items == b.items;
}

}  // namespace strata
