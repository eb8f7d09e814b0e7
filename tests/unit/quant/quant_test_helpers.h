#pragma once
// Helpers shared by the quant-format tests.

#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "quant/quant.h"

namespace strata::quant::test_helpers {

// n values decoded by exactly this level's kernel.
inline std::vector<float> dequantize_all(GgmlType type, const void* data, int64_t n, Isa isa) {
  std::vector<float> out(static_cast<size_t>(n));
  kernels_exact(type, isa).dequantize_row(data, out.data(), n);
  return out;
}

// x quantized by the scalar reference quantizer of `type`.
inline std::vector<uint8_t> quantize_ref(GgmlType type, const std::vector<float>& x) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> out(static_cast<size_t>(row_bytes(type, n)));
  kernels_exact(type, Isa::scalar).quantize_row(x.data(), out.data(), n);
  return out;
}

// Every level that has its own dequantize kernel decodes `block` to exactly `expected`.
inline void expect_decodes(GgmlType type, const void* block, const std::vector<float>& expected) {
  const auto n = static_cast<int64_t>(expected.size());
  for (Isa isa : available_isas()) {
    if (!kernels_exact(type, isa).dequantize_row) continue;
    const auto got = dequantize_all(type, block, n, isa);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_FLOAT_EQ(got[i], expected[i])
          << ggml_type_name(type) << " " << isa_name(isa) << " element " << i;
    }
  }
}

// A (type, instruction-set level) test parameter, printed and named "Q4_K/avx512" / "Q4_K_avx512".
struct TypeLevel {
  GgmlType type;
  Isa isa;
};

inline void PrintTo(const TypeLevel& c, std::ostream* os) {
  *os << ggml_type_name(c.type) << "/" << isa_name(c.isa);
}

inline std::string type_level_name(const testing::TestParamInfo<TypeLevel>& info) {
  return std::string(ggml_type_name(info.param.type)) + "_" + std::string(isa_name(info.param.isa));
}

// Every (type, level) whose own kernel table has `member` (a TypeKernels field); with
// skip_scalar, only the faster levels (the ones compared against the scalar reference).
template <typename Member>
std::vector<TypeLevel> levels_with(Member member, bool skip_scalar = false) {
  std::vector<TypeLevel> out;
  for (GgmlType type : supported_types()) {
    for (Isa isa : available_isas()) {
      if (skip_scalar && isa == Isa::scalar) continue;
      if (kernels_exact(type, isa).*member) out.push_back({type, isa});
    }
  }
  return out;
}

}  // namespace strata::quant::test_helpers
