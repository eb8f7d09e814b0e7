#include "util/memory_bandwidth.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

// A plausibility check (not a timing assertion): the measurement runs, on every thread, and
// reports a finite positive rate for the bytes it was asked to stream.
TEST(MemoryBandwidth, MeasuresAPositiveRate) {
  ThreadPool pool(2);
  const BandwidthMeasurement m = measure_read_bandwidth(pool, 64 << 20, 2);
  EXPECT_GT(m.read_gbps, 0.1);
  EXPECT_LT(m.read_gbps, 10000.0);
  EXPECT_EQ(m.threads, 2);
  EXPECT_EQ(m.buffer_bytes, 64 << 20);
  EXPECT_ANY_THROW(measure_read_bandwidth(pool, 1024, 1));
}

}  // namespace
}  // namespace strata
