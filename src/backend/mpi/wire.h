#pragma once
// The bytes of one message between ranks: plain values and arrays appended in order, read back in
// the same order. Both ends are the same strata build (checked at start), so values travel in the
// host's own layout; a reader past the end is a strata::Error, never a read outside the message.

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "util/error.h"

namespace strata::mpi {

class WireWriter {
 public:
  template <typename T>
  void put(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    append(&value, sizeof(T));
  }
  // The count, then the values.
  template <typename T>
  void put_array(std::span<const T> values) {
    static_assert(std::is_trivially_copyable_v<T>);
    put<int64_t>(static_cast<int64_t>(values.size()));
    append(values.data(), values.size_bytes());
  }
  void put_string(const std::string& s) { put_array(std::span<const char>(s.data(), s.size())); }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  void append(const void* data, size_t n) {
    const size_t at = bytes_.size();
    bytes_.resize(at + n);
    if (n) std::memcpy(bytes_.data() + at, data, n);
  }
  std::vector<uint8_t> bytes_;
};

class WireReader {
 public:
  explicit WireReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  template <typename T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    T value;
    std::memcpy(&value, take(sizeof(T)), sizeof(T));
    return value;
  }
  // The next array, copied out of the message.
  template <typename T>
  std::vector<T> get_array() {
    const auto n = get<int64_t>();
    STRATA_CHECK(n >= 0 && static_cast<uint64_t>(n) <= (bytes_.size() - at_) / sizeof(T),
                 "a message between ranks is cut short (an array of {} values)", n);
    std::vector<T> out(static_cast<size_t>(n));
    if (n)
      std::memcpy(out.data(), take(static_cast<size_t>(n) * sizeof(T)), out.size() * sizeof(T));
    return out;
  }
  // Copies the next array into `out` (which must have its size).
  template <typename T>
  void get_array_into(std::span<T> out) {
    const auto n = get<int64_t>();
    STRATA_CHECK(n == static_cast<int64_t>(out.size()),
                 "a message between ranks holds {} values where {} were expected", n, out.size());
    if (n) std::memcpy(out.data(), take(out.size_bytes()), out.size_bytes());
  }
  std::string get_string() {
    const std::vector<char> chars = get_array<char>();
    return std::string(chars.begin(), chars.end());
  }
  bool done() const { return at_ == bytes_.size(); }

 private:
  const uint8_t* take(size_t n) {
    STRATA_CHECK(n <= bytes_.size() - at_, "a message between ranks is cut short");
    const uint8_t* p = bytes_.data() + at_;
    at_ += n;
    return p;
  }
  std::span<const uint8_t> bytes_;
  size_t at_ = 0;
};

}  // namespace strata::mpi
