// Tile GEMMs (TypeKernels::gemm) equal the scalar reference dot products of every (row, column)
// pair: random weights, row counts that leave a short last tile (1, 8, 13, 21), every column count
// from 1 to 17 (all column-group splits), several block counts, activation rows in shuffled order
// and an output stride wider than the rows. The integer sums are exact; only the float summation
// order differs from the reference.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "quant/quant.h"
#include "quant_test_helpers.h"
#include "support/test_support.h"

namespace strata::quant {
namespace {

using test_helpers::levels_with;
using test_helpers::type_level_name;
using test_helpers::TypeLevel;

// n_rows weight rows of `blocks` blocks against n_cols activation rows.
void check(GgmlType type, GemmFn gemm, int64_t blocks, int64_t n_rows, int64_t n_cols,
           uint32_t seed) {
  const TypeTraits& t = traits(type);
  const int64_t n = blocks * t.block_elems;
  const VecDotFn reference = kernels_exact(type, Isa::scalar).vec_dot;
  // Row-major weights; the float values are kept for the error bound.
  const auto w = test::random_floats(static_cast<size_t>(n * n_rows), seed);
  const std::vector<uint8_t> wq = test_helpers::quantize_ref(type, w);
  const int64_t w_stride = row_bytes(type, n);
  std::vector<std::vector<float>> a;
  std::vector<std::vector<uint8_t>> aq;
  for (int64_t c = 0; c < n_cols; ++c) {
    a.push_back(
        test::random_floats(static_cast<size_t>(n), seed * 7 + 1 + static_cast<uint32_t>(c), 3.0f));
    aq.push_back(test_helpers::quantize_ref(t.activation_type, a.back()));
  }
  // Column c reads activation row (c * 5) % n_cols: any pointer, not a stride.
  std::vector<const uint8_t*> act;
  for (int64_t c = 0; c < n_cols; ++c)
    act.push_back(aq[static_cast<size_t>((c * 5) % n_cols)].data());
  const int64_t out_stride = n_rows + 3;
  constexpr float kUnwritten = -12345.0f;
  std::vector<float> out(static_cast<size_t>(n_cols * out_stride), kUnwritten);
  gemm(n, wq.data(), w_stride, n_rows, act.data(), n_cols, out.data(), out_stride);
  for (int64_t c = 0; c < n_cols; ++c) {
    const int64_t src = (c * 5) % n_cols;
    for (int64_t r = 0; r < n_rows; ++r) {
      const float expected = reference(n, wq.data() + r * w_stride, act[static_cast<size_t>(c)]);
      double magnitude = 0;
      for (int64_t i = 0; i < n; ++i) {
        magnitude += std::fabs(w[static_cast<size_t>(r * n + i)] *
                               a[static_cast<size_t>(src)][static_cast<size_t>(i)]);
      }
      ASSERT_NEAR(out[static_cast<size_t>(c * out_stride + r)], expected, 1e-5 * magnitude)
          << "blocks=" << blocks << " rows=" << n_rows << " cols=" << n_cols << " row " << r
          << " column " << c;
    }
    for (int64_t r = n_rows; r < out_stride; ++r)
      ASSERT_EQ(out[static_cast<size_t>(c * out_stride + r)], kUnwritten) << "wrote past the rows";
  }
}

class Gemm : public testing::TestWithParam<TypeLevel> {};

TEST_P(Gemm, MatchesScalarReference) {
  const auto [type, isa] = GetParam();
  const GemmFn gemm = kernels_exact(type, isa).gemm;
  uint32_t seed = 1;
  for (int64_t blocks : {1, 3, 8}) {
    for (int64_t n_rows : {1, 8, 13, 21}) {
      for (int64_t n_cols = 1; n_cols <= 17; ++n_cols) {
        check(type, gemm, blocks, n_rows, n_cols, seed++);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Beyond one chunk of columns (the driver passes over the rows once per chunk): with 2 blocks a row
// all 150 columns are one pass; rows of 8192 values take passes of 64 columns (gemm_tile.h).
TEST_P(Gemm, ManyColumns) {
  const auto [type, isa] = GetParam();
  check(type, kernels_exact(type, isa).gemm, 2, 11, 150, 99);
  if (HasFatalFailure()) return;
  check(type, kernels_exact(type, isa).gemm, 8192 / traits(type).block_elems, 11, 150, 98);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, Gemm, testing::ValuesIn(levels_with(&TypeKernels::gemm)),
                         type_level_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Gemm);

}  // namespace
}  // namespace strata::quant
