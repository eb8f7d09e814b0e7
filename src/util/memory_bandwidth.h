#pragma once
// Measures how fast this machine streams memory into the cores: the ceiling of memory-bound
// decode (every generated token reads the active weights once).

#include <cstdint>

#include "util/thread_pool.h"

namespace strata {

struct BandwidthMeasurement {
  double read_gbps = 0;  // best of the repetitions, GB/s (1e9 bytes)
  int64_t buffer_bytes = 0;
  int threads = 0;
};

// Streams a buffer far larger than the caches with every thread of the pool reading its own
// slice; returns the best of `repetitions` passes.
BandwidthMeasurement measure_read_bandwidth(ThreadPool& pool,
                                            int64_t buffer_bytes = int64_t{1} << 30,
                                            int repetitions = 5);

}  // namespace strata
