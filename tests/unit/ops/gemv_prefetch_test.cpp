// The load-time measurement that chooses software prefetch for decode GEMVs (that results are
// the same either way is in matmul_gemm_test.cpp).

#include "ops/gemv_prefetch.h"

#include <gtest/gtest.h>

#include <vector>

#include "quant/quant.h"

namespace strata::ops {
namespace {

// A matrix of zero blocks: the tuning times the loop, whatever the values.
struct ZeroMatrix {
  std::vector<uint8_t> bytes;
  WeightMatrix w;
  ZeroMatrix(GgmlType type, int64_t cols, int64_t rows)
      : bytes(static_cast<size_t>(quant::row_bytes(type, cols) * rows)),
        w{type, bytes.data(), cols, rows, quant::row_bytes(type, cols)} {}
};

TEST(GemvPrefetch, KeptOnlyWhenClearlyFaster) {
  const std::vector<double> slow = {10.0, 9.0, 9.5}, fast = {7.0, 8.0, 7.5};
  EXPECT_TRUE(prefetch_pays(fast, slow));
  EXPECT_FALSE(prefetch_pays(slow, fast));
  // The best rounds count, not the averages: one fast round without prefetch decides.
  EXPECT_FALSE(prefetch_pays(std::vector<double>{7.0, 7.0}, std::vector<double>{20.0, 7.1}));
  // A gain within kMinPrefetchGain is a tie, and a tie keeps the simpler loop.
  EXPECT_FALSE(prefetch_pays(std::vector<double>{10.0}, std::vector<double>{10.0 * 1.02}));
  EXPECT_TRUE(prefetch_pays(std::vector<double>{10.0}, std::vector<double>{10.0 * 1.05}));
  EXPECT_FALSE(prefetch_pays(std::vector<double>{}, slow));
}

TEST(GemvPrefetch, MeasuresAndReportsTheFasterWay) {
  const ZeroMatrix g(GgmlType::Q8_0, 1024, 200);
  GemvPrefetchOptions options;
  options.min_bytes = 0;
  options.max_bytes = 50 * g.w.row_bytes;  // only the first 50 rows are timed
  const GemvPrefetchResult r = tune_gemv_prefetch(g.w, options);
  ASSERT_TRUE(r.measured);
  EXPECT_EQ(r.bytes, 50 * g.w.row_bytes);
  EXPECT_GT(r.best_with_ms, 0.0);
  EXPECT_GT(r.best_without_ms, 0.0);
  EXPECT_EQ(r.prefetch, r.best_without_ms > kMinPrefetchGain * r.best_with_ms);
}

TEST(GemvPrefetch, TooSmallToMeasureKeepsPrefetchOff) {
  const ZeroMatrix g(GgmlType::Q8_0, 1024, 16);  // 17 KiB: it would time the cache
  const GemvPrefetchResult r = tune_gemv_prefetch(g.w, GemvPrefetchOptions{});
  EXPECT_FALSE(r.measured);
  EXPECT_FALSE(r.prefetch);
  EXPECT_EQ(r.bytes, g.w.bytes());
}

}  // namespace
}  // namespace strata::ops
