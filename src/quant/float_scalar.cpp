// Scalar reference kernels of the plain float formats F32, F16 and BF16 (block size 1, so n is
// any count). Each dots against its own type. Products are exact in double; sums are in double.

#include <cstdint>
#include <cstring>

#include "quant/kernel_table.h"
#include "util/fp16.h"

namespace strata::quant {
namespace {

// ---- F32 ------------------------------------------------------------------------------------

void dequantize_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void quantize_f32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

float vec_dot_f32(int64_t n, const void* weights, const void* activations) {
  const auto* w = static_cast<const float*>(weights);
  const auto* a = static_cast<const float*>(activations);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(w[i]) * a[i];
  return static_cast<float>(sum);
}

// ---- F16 (IEEE half) ------------------------------------------------------------------------

void dequantize_f16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const f16_bits*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(h[i]);
}

void quantize_f16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<f16_bits*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = f32_to_f16(src[i]);  // round to nearest even
}

float vec_dot_f16(int64_t n, const void* weights, const void* activations) {
  const auto* w = static_cast<const f16_bits*>(weights);
  const auto* a = static_cast<const f16_bits*>(activations);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(f16_to_f32(w[i])) * f16_to_f32(a[i]);
  return static_cast<float>(sum);
}

// ---- BF16 (upper half of an f32) ------------------------------------------------------------

void dequantize_bf16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const bf16_bits*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
}

void quantize_bf16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<bf16_bits*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(src[i]);  // round to nearest even
}

float vec_dot_bf16(int64_t n, const void* weights, const void* activations) {
  const auto* w = static_cast<const bf16_bits*>(weights);
  const auto* a = static_cast<const bf16_bits*>(activations);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    sum += static_cast<double>(bf16_to_f32(w[i])) * bf16_to_f32(a[i]);
  }
  return static_cast<float>(sum);
}

}  // namespace

void fill_float_scalar(KernelTable& table) {
  table[GgmlType::F32] = {dequantize_f32, quantize_f32, vec_dot_f32};
  table[GgmlType::F16] = {dequantize_f16, quantize_f16, vec_dot_f16};
  table[GgmlType::BF16] = {dequantize_bf16, quantize_bf16, vec_dot_bf16};
}

}  // namespace strata::quant
