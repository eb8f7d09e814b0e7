// The importance-weighted search (strata quantize --imatrix): without weights it writes the
// unweighted quantizer's bytes (K-quants and IQ4 also with all weights 1; the legacy types'
// unweighted quantizer is the reference one, which the search only ever improves on); with weights,
// the error that counts (each value's squared error times its weight) is what it cuts.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <random>
#include <vector>

#include "quant/quant.h"
#include "quant_test_helpers.h"

namespace strata::quant {
namespace {

using test_helpers::dequantize_all;
using test_helpers::quantize_ref;

constexpr GgmlType kSearchTypes[] = {GgmlType::Q2_K,  GgmlType::Q3_K, GgmlType::Q4_K,
                                     GgmlType::Q5_K,  GgmlType::Q6_K, GgmlType::IQ4_NL,
                                     GgmlType::IQ4_XS};
constexpr GgmlType kLegacyTypes[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
                                     GgmlType::Q5_1};

std::vector<GgmlType> weighted_types() {
  std::vector<GgmlType> all(std::begin(kSearchTypes), std::end(kSearchTypes));
  all.insert(all.end(), std::begin(kLegacyTypes), std::end(kLegacyTypes));
  return all;
}

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
  for (GgmlType type : kSearchTypes) {
    SCOPED_TRACE(ggml_type_name(type));
    const std::vector<uint8_t> plain = quantize_ref(type, x);
    std::vector<uint8_t> a(plain.size()), b(plain.size());
    ASSERT_TRUE(quantize_row_weighted(type, x.data(), a.data(), n, nullptr));
    ASSERT_TRUE(quantize_row_weighted(type, x.data(), b.data(), n, ones.data()));
    EXPECT_EQ(a, plain);
    EXPECT_EQ(b, plain);
  }
  // The other types have none (and say so).
  const std::vector<GgmlType> weighted = weighted_types();
  for (GgmlType type : supported_types()) {
    const bool listed = std::find(weighted.begin(), weighted.end(), type) != weighted.end();
    EXPECT_EQ(has_weighted_search(type), listed) << ggml_type_name(type);
    if (listed || ggml_type_info(type).block_elems == 1) continue;
    std::vector<uint8_t> out(static_cast<size_t>(row_bytes(type, n)));
    EXPECT_FALSE(quantize_row_weighted(type, x.data(), out.data(), n, ones.data()))
        << ggml_type_name(type);
  }
}

TEST(WeightedQuantize, LegacyTypesKeepTheReferenceBytesWithoutWeightsAndImproveOnThemWithWeights) {
  // Without weights: the reference quantizer's bytes, which are other GGUF tools' bytes (checked
  // against the oracle's files in QuantizeCommand.*). With equal weights the search is a plain
  // least-squares fit: never a larger error than the reference block, smaller over a row.
  constexpr int64_t n = 512;
  const std::vector<float> ones(n, 1.0f);
  for (GgmlType type : kLegacyTypes) {
    SCOPED_TRACE(ggml_type_name(type));
    for (uint32_t seed = 0; seed < 4; ++seed) {
      std::vector<float> x = random_row(n, 10 + seed);
      if (seed == 3) {  // skewed blocks: all positive, and one all-constant block
        for (auto& v : x) v = std::fabs(v) + 0.5f;
        std::fill(x.begin(), x.begin() + 32, 0.25f);
      }
      const std::vector<uint8_t> plain = quantize_ref(type, x);
      std::vector<uint8_t> none(plain.size()), equal(plain.size());
      ASSERT_TRUE(quantize_row_weighted(type, x.data(), none.data(), n, nullptr));
      ASSERT_TRUE(quantize_row_weighted(type, x.data(), equal.data(), n, ones.data()));
      EXPECT_EQ(none, plain);
      const auto ref_values = dequantize_all(type, plain.data(), n, Isa::scalar);
      const auto fit_values = dequantize_all(type, equal.data(), n, Isa::scalar);
      double ref_total = 0, fit_total = 0;
      for (int64_t b = 0; b < n / 32; ++b) {
        double ref_block = 0, fit_block = 0;
        for (int64_t i = b * 32; i < (b + 1) * 32; ++i) {
          ref_block += (double(ref_values[i]) - x[i]) * (double(ref_values[i]) - x[i]);
          fit_block += (double(fit_values[i]) - x[i]) * (double(fit_values[i]) - x[i]);
        }
        EXPECT_LE(fit_block, ref_block * (1 + 1e-5)) << "block " << b;
        ref_total += ref_block;
        fit_total += fit_block;
      }
      EXPECT_LT(fit_total, 0.97 * ref_total) << "seed " << seed;
    }
  }
}

TEST(WeightedQuantize, CutsTheErrorThatTheWeightsSayCounts) {
  // Columns that matter (weight 1) next to columns a text barely uses (weight 0.001), at random.
  constexpr int64_t n = 256 * 8;
  std::mt19937 rng(7);
  std::vector<float> w(static_cast<size_t>(n));
  for (auto& v : w) v = rng() % 4 == 0 ? 1.0f : 0.001f;
  for (GgmlType type : weighted_types()) {
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
