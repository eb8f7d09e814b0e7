// Software prefetch in decode GEMVs: results bit-identical with and without it (and equal to the
// scalar reference dot products), and the load-time measurement that chooses it.

#include "ops/gemv_prefetch.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "quant/quant.h"
#include "support/test_support.h"

namespace strata::ops {
namespace {

// Leaves the process-wide setting as the other tests expect it.
struct RestorePrefetch {
  bool saved = gemv_prefetch();
  ~RestorePrefetch() { set_gemv_prefetch(saved); }
};

struct Gemv {
  std::vector<uint8_t> wq;
  WeightMatrix w;
  QuantizedRows a;
};

Gemv make_gemv(GgmlType type, int64_t cols, int64_t rows) {
  const quant::TypeTraits& t = quant::traits(type);
  Gemv g;
  const auto wf = test::random_floats(static_cast<size_t>(cols * rows), 5);
  g.wq.resize(static_cast<size_t>(quant::row_bytes(type, cols) * rows));
  t.kernels.quantize_row(wf.data(), g.wq.data(), cols * rows);
  g.w = WeightMatrix{type, g.wq.data(), cols, rows, quant::row_bytes(type, cols)};
  const auto x = test::random_floats(static_cast<size_t>(cols), 6);
  g.a.quantize(x.data(), 1, cols, cols, t.activation_type);
  return g;
}

TEST(GemvPrefetch, SameResultsWithAndWithoutItAsTheScalarReference) {
  RestorePrefetch restore;
  ThreadPool pool(2);
  // Rows of a few KiB, so the prefetch distance (8 KiB) runs past the end of the matrix.
  for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q5_0, GgmlType::Q6_K, GgmlType::Q8_0,
                        GgmlType::MXFP4, GgmlType::F16}) {
    SCOPED_TRACE(std::string(ggml_type_name(type)));
    const int64_t cols = 2816, rows = 67;
    const Gemv g = make_gemv(type, cols, rows);
    std::vector<float> with(static_cast<size_t>(rows)), without(static_cast<size_t>(rows));
    set_gemv_prefetch(true);
    matmul(g.w, g.a, with.data(), rows, pool);
    set_gemv_prefetch(false);
    matmul(g.w, g.a, without.data(), rows, pool);
    ASSERT_EQ(std::memcmp(with.data(), without.data(), with.size() * sizeof(float)), 0);
    const quant::VecDotFn reference = quant::kernels_exact(type, quant::Isa::scalar).vec_dot;
    for (int64_t r = 0; r < rows; ++r) {
      const float expected = reference(cols, g.w.row(r), g.a.row(0));
      ASSERT_NEAR(without[static_cast<size_t>(r)], expected, 1e-4 * (1 + std::fabs(expected)))
          << "row " << r;
    }
  }
}

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

TEST(GemvPrefetch, MeasuresAndSetsTheFasterWay) {
  RestorePrefetch restore;
  const Gemv g = make_gemv(GgmlType::Q8_0, 1024, 200);
  GemvPrefetchOptions options;
  options.min_bytes = 0;
  options.max_bytes = 50 * g.w.row_bytes;  // only the first 50 rows are timed
  const GemvPrefetchResult r = tune_gemv_prefetch(g.w, options);
  ASSERT_TRUE(r.measured);
  EXPECT_EQ(r.bytes, 50 * g.w.row_bytes);
  EXPECT_GT(r.best_with_ms, 0.0);
  EXPECT_GT(r.best_without_ms, 0.0);
  EXPECT_EQ(r.prefetch, r.best_without_ms > kMinPrefetchGain * r.best_with_ms);
  EXPECT_EQ(gemv_prefetch(), r.prefetch);
}

TEST(GemvPrefetch, TooSmallToMeasureLeavesTheSettingAlone) {
  RestorePrefetch restore;
  const Gemv g = make_gemv(GgmlType::Q8_0, 1024, 16);  // 17 KiB: it would time the cache
  for (bool setting : {true, false}) {
    set_gemv_prefetch(setting);
    const GemvPrefetchResult r = tune_gemv_prefetch(g.w, GemvPrefetchOptions{});
    EXPECT_FALSE(r.measured);
    EXPECT_EQ(r.bytes, g.w.bytes());
    EXPECT_EQ(gemv_prefetch(), setting);
  }
}

}  // namespace
}  // namespace strata::ops
