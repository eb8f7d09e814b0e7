#pragma once
// Wall-clock helpers shared by the calibration micro-benchmarks (calibration.cpp,
// expert_rates.cpp).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace strata::plan {

using CalibrationClock = std::chrono::steady_clock;

inline double seconds_since(CalibrationClock::time_point start) {
  return std::chrono::duration<double>(CalibrationClock::now() - start).count();
}

struct CallTiming {
  double seconds = 0;  // all calls together
  int64_t calls = 0;
};

// Calls fn until at least `min_seconds` and `min_calls` have passed. Calls are summed, not
// filtered (no best-of): `strata bench` reports means, and on a shared machine a window long
// enough to smooth it sees the same kind of interference (a pool thread preempted) the benchmark
// does.
template <typename Fn>
CallTiming time_calls(Fn&& fn, double min_seconds, int64_t min_calls) {
  CallTiming t;
  const auto start = CalibrationClock::now();
  while (t.calls < min_calls || t.seconds < min_seconds) {
    fn();
    ++t.calls;
    t.seconds = seconds_since(start);
  }
  return t;
}

template <typename Fn>
double seconds_per_call(Fn&& fn, double min_seconds, int64_t min_calls) {
  const CallTiming t = time_calls(fn, min_seconds, min_calls);
  return t.seconds / static_cast<double>(t.calls);
}

// The middle value (the upper one of an even count); v must not be empty.
inline double median(std::vector<double> v) {
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

}  // namespace strata::plan
