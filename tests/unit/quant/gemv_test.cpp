// Decode's GEMV kernels (TypeKernels::gemv) against the same level's vec_dot, row by row: random
// rows of odd, even and partial quad counts, at a row stride one byte past the row size (rows start
// at every alignment), and the activation at an odd address. Decode goes through gemv and the
// verify steps of speculation and prompt tokens through vec_dot and vec_dot_multi, so the two must
// agree bit for bit for greedy output to be the same either way.

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "quant/quant.h"
#include "quant_test_helpers.h"
#include "support/test_support.h"

namespace strata::quant {
namespace {

using test_helpers::levels_with;
using test_helpers::type_level_name;
using test_helpers::TypeLevel;

class Gemv : public testing::TestWithParam<TypeLevel> {};

TEST_P(Gemv, EveryRowIsVecDotBitForBit) {
  const auto [type, isa] = GetParam();
  const TypeKernels k = kernels_exact(type, isa);
  ASSERT_NE(k.vec_dot, nullptr) << "a level with gemv must have its own vec_dot";
  const TypeTraits& t = traits(type);
  constexpr int64_t kRows = 5;
  // 1-3 blocks: a partial quad alone; 4: one quad; 8, 12: pairs and an odd quad; 9, 33, 90 (a
  // gpt-oss row): full quads and a partial one.
  for (int64_t blocks : {1, 2, 3, 4, 8, 9, 12, 33, 90}) {
    SCOPED_TRACE(testing::Message() << "blocks " << blocks);
    const int64_t n = blocks * t.block_elems;
    const int64_t size = row_bytes(type, n);
    const int64_t stride = size + 1;
    std::vector<uint8_t> rows(static_cast<size_t>(stride * kRows));
    for (int64_t r = 0; r < kRows; ++r) {
      const auto w = test::random_floats(static_cast<size_t>(n), 7 * static_cast<uint32_t>(r + 1));
      const auto q = test_helpers::quantize_ref(type, w);
      std::memcpy(rows.data() + r * stride, q.data(), q.size());
    }
    const auto a = test::random_floats(static_cast<size_t>(n), 99);
    const auto aq = test_helpers::quantize_ref(t.activation_type, a);
    std::vector<uint8_t> act(aq.size() + 1);
    std::memcpy(act.data() + 1, aq.data(), aq.size());

    std::vector<float> out(kRows + 1, -12345.0f);
    k.gemv(n, rows.data(), stride, kRows, act.data() + 1, out.data());
    EXPECT_EQ(out[kRows], -12345.0f) << "wrote past the last row";
    for (int64_t r = 0; r < kRows; ++r) {
      // vec_dot of an aligned copy: the reference the rest of the engine already checks.
      const std::vector<uint8_t> row(rows.begin() + r * stride, rows.begin() + r * stride + size);
      const float expected = k.vec_dot(n, row.data(), aq.data());
      EXPECT_EQ(std::bit_cast<uint32_t>(out[static_cast<size_t>(r)]),
                std::bit_cast<uint32_t>(expected))
          << "row " << r << ": " << out[static_cast<size_t>(r)] << " vs " << expected;
      // And near the product of the dequantized row with the float activation (only the
      // activation's 8-bit rounding apart), so neither side is wrong in the same way.
      std::vector<float> w(static_cast<size_t>(n));
      kernels_exact(type, Isa::scalar).dequantize_row(row.data(), w.data(), n);
      double exact = 0, magnitude = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double p = double{w[static_cast<size_t>(i)]} * a[static_cast<size_t>(i)];
        exact += p;
        magnitude += std::fabs(p);
      }
      EXPECT_NEAR(out[static_cast<size_t>(r)], exact, 0.02 * magnitude + 1e-4) << "row " << r;
    }
  }
  // No rows: nothing written.
  float untouched = 1.5f;
  k.gemv(t.block_elems, nullptr, 0, 0, nullptr, &untouched);
  EXPECT_EQ(untouched, 1.5f);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, Gemv, testing::ValuesIn(levels_with(&TypeKernels::gemv)),
                         type_level_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Gemv);

// What matmul sees: a dispatched gemv comes only with the vec_dot of its own level.
TEST(Gemv, DispatchedOnlyWithItsOwnVecDot) {
  for (GgmlType type : supported_types()) {
    for (Isa isa : available_isas()) {
      const TypeKernels at = kernels_at(type, isa);
      if (!at.gemv) continue;
      bool same_level = false;
      for (int level = static_cast<int>(isa); level >= 0 && !same_level; --level) {
        const TypeKernels exact = kernels_exact(type, static_cast<Isa>(level));
        same_level = exact.gemv == at.gemv && exact.vec_dot == at.vec_dot;
      }
      EXPECT_TRUE(same_level) << ggml_type_name(type) << "/" << isa_name(isa);
    }
  }
}

}  // namespace
}  // namespace strata::quant
