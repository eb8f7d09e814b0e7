#pragma once
// A GGUF metadata value: one of the 13 GGUF value types, arrays possibly nested.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace strata {

enum class GgufValueType : uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};
constexpr uint32_t kGgufValueTypeCount = 13;

std::string_view gguf_value_type_name(GgufValueType type);

class GgufValue;

struct GgufArray {
  GgufValueType element_type = GgufValueType::u8;
  std::vector<GgufValue> items;
};

class GgufValue {
 public:
  // Storage alternatives, in the order of GgufValueType.
  using Storage = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool,
                               std::string, GgufArray, uint64_t, int64_t, double>;

  GgufValue() : storage_(uint8_t{0}) {}
  template <typename T>
  explicit GgufValue(T value) : storage_(std::move(value)) {}
  static GgufValue string(std::string s) { return GgufValue(std::move(s)); }
  static GgufValue array(GgufValueType element_type, std::vector<GgufValue> items) {
    return GgufValue(GgufArray{element_type, std::move(items)});
  }
  static GgufValue string_array(const std::vector<std::string>& items);

  GgufValueType type() const { return static_cast<GgufValueType>(storage_.index()); }
  const Storage& storage() const { return storage_; }

  bool is_integer() const;
  bool is_number() const {
    return is_integer() || type() == GgufValueType::f32 || type() == GgufValueType::f64;
  }
  // Conversions return nullopt when the value is not of a compatible kind or out of range.
  std::optional<int64_t> as_int() const;
  std::optional<uint64_t> as_uint() const;
  std::optional<double> as_double() const;
  const std::string* as_string() const { return std::get_if<std::string>(&storage_); }
  const GgufArray* as_array() const { return std::get_if<GgufArray>(&storage_); }
  std::optional<bool> as_bool() const;

  // Short human-readable rendering; arrays longer than max_items are summarized.
  std::string to_display_string(size_t max_items = 8) const;

  bool operator==(const GgufValue& other) const;

 private:
  Storage storage_;
};

bool operator==(const GgufArray& a, const GgufArray& b);

struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

}  // namespace strata
