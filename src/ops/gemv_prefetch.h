#pragma once
// Whether software prefetch speeds up decode GEMVs is a property of the machine, not of the code:
// 8 KiB ahead gave +15-20% decode on one host and cost a third of it on another (a Zen 4 VM whose
// hardware prefetchers already stream at RAM speed from huge pages). So it is measured at load,
// on the model's own weights, and the faster way is kept (MatmulSettings::gemv_prefetch).

#include <cstdint>
#include <span>

#include "ops/matmul.h"

namespace strata::ops {

// Prefetch is kept only when its fastest round beats the fastest round without it by this much:
// without it the loop does less work, so a tie goes to the hardware prefetchers.
constexpr double kMinPrefetchGain = 1.03;

// The decision from timings of the same GEMVs (one per round, rounds alternated).
bool prefetch_pays(std::span<const double> with_prefetch_ms,
                   std::span<const double> without_prefetch_ms);

struct GemvPrefetchResult {
  bool measured = false;  // false: too few bytes to stream from RAM (prefetch stays off)
  bool prefetch = false;  // the faster way: MatmulSettings::gemv_prefetch for the model
  double best_with_ms = 0;
  double best_without_ms = 0;
  int64_t bytes = 0;  // weight bytes one timed GEMV streams
};

struct GemvPrefetchOptions {
  int rounds = 3;
  int64_t min_bytes = int64_t{64} << 20;   // below this the rows may sit in a large L3
  int64_t max_bytes = int64_t{256} << 20;  // enough to stream; keeps the measurement near 0.1 s
};

// Times single-token products over the first rows of `w` (up to max_bytes), with and without
// software prefetch in alternating rounds after one untimed pass (which also faults in mapped
// pages), on the calling thread; the result says which is faster.
GemvPrefetchResult tune_gemv_prefetch(const WeightMatrix& w, const GemvPrefetchOptions& options);

}  // namespace strata::ops
