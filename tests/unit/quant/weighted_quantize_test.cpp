// The importance-weighted K-quant and IQ4 search (strata quantize --imatrix): without weights, or
// with all weights 1, it writes the unweighted quantizer's bytes; with weights, the error that
// counts (each value's squared error times its weight) is what it cuts.

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <random>
#include <vector>

#include "quant/quant.h"
#include "quant_test_helpers.h"

namespace strata::quant {
namespace {

using test_helpers::dequantize_all;
using test_helpers::quantize_ref;

constexpr GgmlType kWeightedTypes[] = {GgmlType::Q2_K,  GgmlType::Q3_K, GgmlType::Q4_K,
                                       GgmlType::Q5_K,  GgmlType::Q6_K, GgmlType::IQ4_NL,
                                       GgmlType::IQ4_XS};

std::vector<float> random_row(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = d(rng);
  return x;
}

double weighted_error(GgmlType type, const std::vector<uint8_t>& q, const std::vector<float>& x,
                      const std::vector<float>& w) {
  const auto y = dequantize_all(type, q.data(), static_cast<int64_t>(x.size()), Isa::scalar);
  double e = 0;
  for (size_t i = 0; i < x.size(); ++i) e += w[i] * (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
  return e;
}

TEST(WeightedQuantize, UnitOrNoWeightsGiveTheUnweightedBytes) {
  constexpr int64_t n = 512;
  const std::vector<float> x = random_row(n, 1);
  const std::vector<float> ones(n, 1.0f);
  for (GgmlType type : kWeightedTypes) {
    SCOPED_TRACE(ggml_type_name(type));
    const std::vector<uint8_t> plain = quantize_ref(type, x);
    std::vector<uint8_t> a(plain.size()), b(plain.size());
    ASSERT_TRUE(quantize_row_weighted(type, x.data(), a.data(), n, nullptr));
    ASSERT_TRUE(quantize_row_weighted(type, x.data(), b.data(), n, ones.data()));
    EXPECT_EQ(a, plain);
    EXPECT_EQ(b, plain);
  }
  // The other types have none (and say so).
  for (GgmlType type : supported_types()) {
    const bool listed = std::find(std::begin(kWeightedTypes), std::end(kWeightedTypes), type) !=
                        std::end(kWeightedTypes);
    EXPECT_EQ(has_weighted_search(type), listed) << ggml_type_name(type);
    if (listed || ggml_type_info(type).block_elems == 1) continue;
    std::vector<uint8_t> out(static_cast<size_t>(row_bytes(type, n)));
    EXPECT_FALSE(quantize_row_weighted(type, x.data(), out.data(), n, ones.data()))
        << ggml_type_name(type);
  }
}

TEST(WeightedQuantize, CutsTheErrorThatTheWeightsSayCounts) {
  // Columns that matter (weight 1) next to columns a text barely uses (weight 0.001), at random.
  constexpr int64_t n = 256 * 8;
  std::mt19937 rng(7);
  std::vector<float> w(static_cast<size_t>(n));
  for (auto& v : w) v = rng() % 4 == 0 ? 1.0f : 0.001f;
  for (GgmlType type : kWeightedTypes) {
    SCOPED_TRACE(ggml_type_name(type));
    double plain_error = 0, weighted = 0;
    for (uint32_t seed = 0; seed < 8; ++seed) {
      const std::vector<float> x = random_row(n, 100 + seed);
      std::vector<uint8_t> q(static_cast<size_t>(row_bytes(type, n)));
      ASSERT_TRUE(quantize_row_weighted(type, x.data(), q.data(), n, w.data()));
      weighted += weighted_error(type, q, x, w);
      plain_error += weighted_error(type, quantize_ref(type, x), x, w);
    }
    EXPECT_LT(weighted, 0.8 * plain_error) << weighted << " vs " << plain_error;
  }
}

}  // namespace
}  // namespace strata::quant
