// Every faster instruction-set level agrees with the scalar reference, for every supported type,
// on random data and on odd block counts (1, 3, 7, 33, 129 blocks).

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "quant/quant.h"
#include "support/test_support.h"

namespace strata::quant {
namespace {

struct Case {
  GgmlType type;
  Isa isa;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << ggml_type_name(c.type) << "/" << isa_name(c.isa);
}

std::string case_name(const testing::TestParamInfo<Case>& info) {
  return std::string(ggml_type_name(info.param.type)) + "_" + std::string(isa_name(info.param.isa));
}

// The (type, level) pairs where a faster level has its own kernel of the given kind; levels
// without one fall back to the level below and are covered there.
template <typename Member>
std::vector<Case> faster_levels_with(Member member) {
  std::vector<Case> out;
  for (GgmlType type : supported_types()) {
    for (Isa isa : available_isas()) {
      if (isa != Isa::scalar && kernels_exact(type, isa).*member) out.push_back({type, isa});
    }
  }
  return out;
}

class DotAgreement : public testing::TestWithParam<Case> {};
class DequantizeAgreement : public testing::TestWithParam<Case> {};
class QuantizeAgreement : public testing::TestWithParam<Case> {};

std::vector<uint8_t> quantize(GgmlType type, const std::vector<float>& values) {
  std::vector<uint8_t> bytes(
      static_cast<size_t>(row_bytes(type, static_cast<int64_t>(values.size()))));
  const TypeKernels ref = kernels_exact(type, Isa::scalar);
  ref.quantize_row(values.data(), bytes.data(), static_cast<int64_t>(values.size()));
  return bytes;
}

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
    const auto wq = quantize(type, w);
    const auto aq = quantize(t.activation_type, a);
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
  const auto q = quantize(type, test::random_floats(static_cast<size_t>(n), 5));
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
  const auto qr = quantize(type, x);
  std::vector<float> df(static_cast<size_t>(n)), dr(static_cast<size_t>(n));
  const TypeKernels ref = kernels_exact(type, Isa::scalar);
  ASSERT_NE(ref.dequantize_row, nullptr);
  ref.dequantize_row(qf.data(), df.data(), n);
  ref.dequantize_row(qr.data(), dr.data(), n);
  EXPECT_LT(test::nmse(df.data(), dr.data(), static_cast<size_t>(n)), 1e-3)
      << "fast quantizer decodes far from the reference quantizer";
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DotAgreement,
                         testing::ValuesIn(faster_levels_with(&TypeKernels::vec_dot)), case_name);
INSTANTIATE_TEST_SUITE_P(AllTypes, DequantizeAgreement,
                         testing::ValuesIn(faster_levels_with(&TypeKernels::dequantize_row)),
                         case_name);
INSTANTIATE_TEST_SUITE_P(AllTypes, QuantizeAgreement,
                         testing::ValuesIn(faster_levels_with(&TypeKernels::quantize_row)),
                         case_name);

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
