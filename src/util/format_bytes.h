#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace strata {

// 1536 -> "1.50 KiB"; exact byte counts below 1 KiB.
inline std::string format_bytes(uint64_t bytes) {
  constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.2f} {}", value, units[unit]);
}

// 30532122624 -> "30.53 B"; 3806720 -> "3.81 M".
inline std::string format_count(int64_t n) {
  if (n >= 1'000'000'000) return fmt::format("{:.2f} B", n / 1e9);
  if (n >= 1'000'000) return fmt::format("{:.2f} M", n / 1e6);
  if (n >= 1'000) return fmt::format("{:.2f} K", n / 1e3);
  return fmt::format("{}", n);
}

}  // namespace strata
