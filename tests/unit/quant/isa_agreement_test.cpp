// Every faster instruction-set level agrees with the scalar reference, for every supported type,
// on random data and on odd block counts (1, 3, 7, 33, 129 blocks).

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

class DotAgreement : public testing::TestWithParam<TypeLevel> {};
class DequantizeAgreement : public testing::TestWithParam<TypeLevel> {};
class QuantizeAgreement : public testing::TestWithParam<TypeLevel> {};

TEST_P(DotAgreement, MatchesReference) {
  const auto [type, isa] = GetParam();
  const TypeTraits& t = traits(type);
  const TypeKernels fast = kernels_exact(type, isa);
  const TypeKernels ref = kernels_exact(type, Isa::scalar);
  ASSERT_NE(ref.vec_dot, nullptr);
  for (int64_t blocks : {1, 3, 7, 33, 129}) {
    const int64_t n = blocks * std::max<int64_t>(t.block_elems, 32);
    const auto w = test::random_floats(static_cast<size_t>(n), 17 + static_cast<uint32_t>(blocks));
    const auto a = test::random_floats(static_cast<size_t>(n), 91 + static_cast<uint32_t>(blocks));
    const auto wq = test_helpers::quantize_ref(type, w);
    const auto aq = test_helpers::quantize_ref(t.activation_type, a);
    const float expected = ref.vec_dot(n, wq.data(), aq.data());
    const float got = fast.vec_dot(n, wq.data(), aq.data());
    // Bound: float re-association over n terms, relative to the magnitude of the terms.
    double magnitude = 0;
    for (int64_t i = 0; i < n; ++i) magnitude += std::fabs(w[i] * a[i]);
    EXPECT_NEAR(got, expected, 1e-5 * magnitude + 1e-6) << "n=" << n;
  }
}

TEST_P(DequantizeAgreement, MatchesReference) {
  const auto [type, isa] = GetParam();
  const TypeKernels fast = kernels_exact(type, isa);
  const TypeTraits& t = traits(type);
  const int64_t n = 33 * std::max<int64_t>(t.block_elems, 32);
  const auto q = test_helpers::quantize_ref(type, test::random_floats(static_cast<size_t>(n), 5));
  std::vector<float> expected(static_cast<size_t>(n)), got(static_cast<size_t>(n));
  kernels_exact(type, Isa::scalar).dequantize_row(q.data(), expected.data(), n);
  fast.dequantize_row(q.data(), got.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(got[i], expected[i], 1e-6f * std::fabs(expected[i]) + 1e-7f) << "i=" << i;
  }
}

TEST_P(QuantizeAgreement, MatchesReference) {
  // Activation quantizers are rewritten per level; results may differ by rounding of the scale,
  // so compare what the blocks decode to: within half a quantization step of the reference.
  const auto [type, isa] = GetParam();
  const TypeKernels fast = kernels_exact(type, isa);
  const TypeTraits& t = traits(type);
  const int64_t n = 33 * std::max<int64_t>(t.block_elems, 32);
  const auto x = test::random_floats(static_cast<size_t>(n), 23);
  std::vector<uint8_t> qf(static_cast<size_t>(row_bytes(type, n)));
  fast.quantize_row(x.data(), qf.data(), n);
  const auto qr = test_helpers::quantize_ref(type, x);
  std::vector<float> df(static_cast<size_t>(n)), dr(static_cast<size_t>(n));
  const TypeKernels ref = kernels_exact(type, Isa::scalar);
  ASSERT_NE(ref.dequantize_row, nullptr);
  ref.dequantize_row(qf.data(), df.data(), n);
  ref.dequantize_row(qr.data(), dr.data(), n);
  EXPECT_LT(test::nmse(df.data(), dr.data(), static_cast<size_t>(n)), 1e-3)
      << "fast quantizer decodes far from the reference quantizer";
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DotAgreement,
                         testing::ValuesIn(levels_with(&TypeKernels::vec_dot,
                                                       /*skip_scalar=*/true)),
                         type_level_name);
INSTANTIATE_TEST_SUITE_P(AllTypes, DequantizeAgreement,
                         testing::ValuesIn(levels_with(&TypeKernels::dequantize_row,
                                                       /*skip_scalar=*/true)),
                         type_level_name);
INSTANTIATE_TEST_SUITE_P(AllTypes, QuantizeAgreement,
                         testing::ValuesIn(levels_with(&TypeKernels::quantize_row,
                                                       /*skip_scalar=*/true)),
                         type_level_name);
// Empty when the level is capped to scalar (STRATA_ISA=scalar) or the CPU lacks AVX2.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(DotAgreement);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(DequantizeAgreement);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(QuantizeAgreement);

// Every supported weight type has a faster dot product on a CPU with AVX2 (this one has it).
TEST(QuantTable, EveryWeightTypeHasAFastDot) {
  if (best_isa() == Isa::scalar) return;  // a CPU without AVX2 runs the references only
  for (GgmlType type : supported_types()) {
    if (!kernels_exact(type, Isa::scalar).vec_dot) continue;
    EXPECT_NE(kernels_at(type, best_isa()).vec_dot, kernels_exact(type, Isa::scalar).vec_dot)
        << ggml_type_name(type);
  }
}

TEST(QuantTable, EveryTypeHasReferenceKernels) {
  for (GgmlType type : supported_types()) {
    const TypeKernels ref = kernels_exact(type, Isa::scalar);
    const TypeTraits& t = traits(type);
    EXPECT_NE(ref.dequantize_row, nullptr) << t.name;
    EXPECT_NE(ref.quantize_row, nullptr) << t.name;
    const bool activation_only = type == GgmlType::Q8_1 || type == GgmlType::Q8_K;
    if (!activation_only) {
      EXPECT_NE(ref.vec_dot, nullptr) << t.name;
    }
    EXPECT_EQ(row_bytes(type, t.block_elems), t.block_bytes) << t.name;
  }
}

TEST(QuantTable, UnsupportedTypeErrorListsSupported) {
  try {
    traits(GgmlType::IQ2_XXS);
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("IQ2_XXS"), std::string::npos) << message;
    EXPECT_NE(message.find("Q4_K"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace strata::quant
