#pragma once
// Weights for the GPU kernel tests: every weight type strata computes with, and random matrices
// quantized by the CPU's reference quantizer with the CPU's dequantization beside them (the
// values the GPU's products must reproduce).

#include <cstdint>
#include <vector>

#include "gguf/ggml_type.h"
#include "quant/quant.h"
#include "support/test_support.h"

namespace strata::vk::test {

inline constexpr GgmlType kWeightTypes[] = {
    GgmlType::F32,  GgmlType::F16,    GgmlType::BF16,   GgmlType::Q4_0,
    GgmlType::Q4_1, GgmlType::Q5_0,   GgmlType::Q5_1,   GgmlType::Q8_0,
    GgmlType::Q2_K, GgmlType::Q3_K,   GgmlType::Q4_K,   GgmlType::Q5_K,
    GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4};

struct TestMatrix {
  std::vector<uint8_t> bytes;
  std::vector<float> dequantized;  // [rows][cols]
  int64_t rows, cols, row_bytes;
};

inline TestMatrix make_matrix(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  TestMatrix m{{}, {}, rows, cols, quant::row_bytes(type, cols)};
  const auto w = strata::test::random_floats(static_cast<size_t>(rows * cols), seed);
  m.bytes.resize(static_cast<size_t>(rows * m.row_bytes));
  m.dequantized.resize(w.size());
  const auto& k = quant::kernels_exact(type, quant::Isa::scalar);
  for (int64_t r = 0; r < rows; ++r) {
    k.quantize_row(w.data() + r * cols, m.bytes.data() + r * m.row_bytes, cols);
    k.dequantize_row(m.bytes.data() + r * m.row_bytes, m.dequantized.data() + r * cols, cols);
  }
  return m;
}

}  // namespace strata::vk::test
