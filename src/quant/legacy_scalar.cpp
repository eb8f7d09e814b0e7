// Scalar reference kernels of the legacy formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and the activation
// format Q8_1. Blocks of 32 elements; layouts in blocks.h. This is the ground truth the SIMD levels
// are tested against: plain loops, double accumulation in the dot products.
//
// Weight quantizers are the standard GGUF reference ones, so a row quantized here is what other
// GGUF tools write for the same floats:
//   Q4_0 / Q5_0: d = (signed value of largest magnitude) / -8 (/ -16), so that value maps exactly
//                to the most negative code; q = clamp(floor(x / d + 8.5)) (+ 16.5).
//   Q4_1 / Q5_1: d = (max - min) / 15 (/ 31), m = min; q = clamp(floor((x - min) / d + 0.5)).
//   Q8_0 / Q8_1: d = max|x| / 127; q = x / d rounded to nearest, ties away from zero; Q8_1 adds
//                s = d * sum(q). The division by d is a multiplication by 1/d in float, as the
//                other tools do; d and s are stored rounded to f16.
// Checked against the oracle models: re-quantizing their F16 tensors reproduces the Q4_0, Q4_1,
// Q5_0, Q5_1 and Q8_0 files' blocks byte for byte.

#include <cmath>
#include <cstdint>

#include "quant/kernel_table.h"
#include "quant/legacy_common.h"
#include "quant/scale_fit.h"

namespace strata::quant {
namespace {

constexpr int kHalf = kQK / 2;

void min_max(const float* x, float& min, float& max) {
  min = x[0];
  max = x[0];
  for (int j = 1; j < kQK; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
}

int clamp_code(float v, int top) {
  const int q = static_cast<int>(v);  // v >= 0 here: truncation is floor
  return q > top ? top : q;
}

// ---- Q4_0: value = (q - 8) * d -------------------------------------------------------------

void dequantize_q4_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < kHalf; ++j) {
      dst[j] = static_cast<float>((b[i].qs[j] & 0x0f) - 8) * d;
      dst[j + kHalf] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void quantize_q4_0(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ4_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    const float d = signed_absmax(src, kQK) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f32_to_f16(d);
    for (int j = 0; j < kHalf; ++j) {
      const int lo = clamp_code(src[j] * id + 8.5f, 15);
      const int hi = clamp_code(src[j + kHalf] * id + 8.5f, 15);
      b[i].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

float vec_dot_q4_0_q8_0(int64_t n, const void* weights, const void* activations) {
  const auto* w = static_cast<const BlockQ4_0*>(weights);
  const auto* a = static_cast<const BlockQ8_0*>(activations);
  double sum = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sumi = 0;
    for (int j = 0; j < kHalf; ++j) {
      sumi += ((w[i].qs[j] & 0x0f) - 8) * a[i].qs[j];
      sumi += ((w[i].qs[j] >> 4) - 8) * a[i].qs[j + kHalf];
    }
    sum += static_cast<double>(f16_to_f32(w[i].d)) * f16_to_f32(a[i].d) * sumi;
  }
  return static_cast<float>(sum);
}

// ---- Q4_1: value = q * d + m ----------------------------------------------------------------
// Dequantization is written as one fused multiply-add so that every level rounds it identically.

void dequantize_q4_1(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = f16_to_f32(b[i].d), m = f16_to_f32(b[i].m);
    for (int j = 0; j < kHalf; ++j) {
      dst[j] = std::fma(static_cast<float>(b[i].qs[j] & 0x0f), d, m);
      dst[j + kHalf] = std::fma(static_cast<float>(b[i].qs[j] >> 4), d, m);
    }
  }
}

void quantize_q4_1(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ4_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    float min, max;
    min_max(src, min, max);
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f32_to_f16(d);
    b[i].m = f32_to_f16(min);
    for (int j = 0; j < kHalf; ++j) {
      const int lo = clamp_code((src[j] - min) * id + 0.5f, 15);
      const int hi = clamp_code((src[j + kHalf] - min) * id + 0.5f, 15);
      b[i].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

// sum (q*dw + m) * (qa*da) = dw*da * sum(q*qa) + m * (da*sum(qa)); the last factor is the
// activation block's stored s (f16), as in the other GGUF engines.
float vec_dot_q4_1_q8_1(int64_t n, const void* weights, const void* activations) {
  const auto* w = static_cast<const BlockQ4_1*>(weights);
  const auto* a = static_cast<const BlockQ8_1*>(activations);
  double sum = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sumi = 0;
    for (int j = 0; j < kHalf; ++j) {
      sumi += (w[i].qs[j] & 0x0f) * a[i].qs[j];
      sumi += (w[i].qs[j] >> 4) * a[i].qs[j + kHalf];
    }
    sum += static_cast<double>(f16_to_f32(w[i].d)) * f16_to_f32(a[i].d) * sumi;
    sum += static_cast<double>(f16_to_f32(w[i].m)) * f16_to_f32(a[i].s);
  }
  return static_cast<float>(sum);
}

// ---- Q5_0: value = (q - 16) * d, q = low nibble | bit j of qh << 4 ----------------------------

int q5_code(const uint8_t* qs, uint32_t qh, int j) {
  const int nibble = j < kHalf ? (qs[j] & 0x0f) : (qs[j - kHalf] >> 4);
  return nibble | static_cast<int>(((qh >> j) & 1u) << 4);
}

void dequantize_q5_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = f16_to_f32(b[i].d);
    const uint32_t qh = load_qh(b[i].qh);
    for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(q5_code(b[i].qs, qh, j) - 16) * d;
  }
}

void quantize_q5_0(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ5_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    const float d = signed_absmax(src, kQK) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f32_to_f16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kHalf; ++j) {
      const int lo = clamp_code(src[j] * id + 16.5f, 31);
      const int hi = clamp_code(src[j + kHalf] * id + 16.5f, 31);
      b[i].qs[j] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
      qh |= static_cast<uint32_t>(lo >> 4) << j;
      qh |= static_cast<uint32_t>(hi >> 4) << (j + kHalf);
    }
    std::memcpy(b[i].qh, &qh, sizeof qh);
  }
}

float vec_dot_q5_0_q8_0(int64_t n, const void* weights, const void* activations) {
  const auto* w = static_cast<const BlockQ5_0*>(weights);
  const auto* a = static_cast<const BlockQ8_0*>(activations);
  double sum = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const uint32_t qh = load_qh(w[i].qh);
    int sumi = 0;
    for (int j = 0; j < kQK; ++j) sumi += (q5_code(w[i].qs, qh, j) - 16) * a[i].qs[j];
    sum += static_cast<double>(f16_to_f32(w[i].d)) * f16_to_f32(a[i].d) * sumi;
  }
  return static_cast<float>(sum);
}

// ---- Q5_1: value = q * d + m ----------------------------------------------------------------

void dequantize_q5_1(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = f16_to_f32(b[i].d), m = f16_to_f32(b[i].m);
    const uint32_t qh = load_qh(b[i].qh);
    for (int j = 0; j < kQK; ++j) {
      dst[j] = std::fma(static_cast<float>(q5_code(b[i].qs, qh, j)), d, m);
    }
  }
}

void quantize_q5_1(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ5_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    float min, max;
    min_max(src, min, max);
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f32_to_f16(d);
    b[i].m = f32_to_f16(min);
    uint32_t qh = 0;
    for (int j = 0; j < kHalf; ++j) {
      const int lo = clamp_code((src[j] - min) * id + 0.5f, 31);
      const int hi = clamp_code((src[j + kHalf] - min) * id + 0.5f, 31);
      b[i].qs[j] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
      qh |= static_cast<uint32_t>(lo >> 4) << j;
      qh |= static_cast<uint32_t>(hi >> 4) << (j + kHalf);
    }
    std::memcpy(b[i].qh, &qh, sizeof qh);
  }
}

float vec_dot_q5_1_q8_1(int64_t n, const void* weights, const void* activations) {
  const auto* w = static_cast<const BlockQ5_1*>(weights);
  const auto* a = static_cast<const BlockQ8_1*>(activations);
  double sum = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const uint32_t qh = load_qh(w[i].qh);
    int sumi = 0;
    for (int j = 0; j < kQK; ++j) sumi += q5_code(w[i].qs, qh, j) * a[i].qs[j];
    sum += static_cast<double>(f16_to_f32(w[i].d)) * f16_to_f32(a[i].d) * sumi;
    sum += static_cast<double>(f16_to_f32(w[i].m)) * f16_to_f32(a[i].s);
  }
  return static_cast<float>(sum);
}

// ---- Q8_0: value = q * d ---------------------------------------------------------------------

void dequantize_q8_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

// Quantizes one block: writes the 32 codes, returns d (unrounded and as f16) and their sum.
Q8BlockScale quantize_q8_block(const float* x, int8_t* qs) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = std::fabs(x[j]) > amax ? std::fabs(x[j]) : amax;
  const float d = q8_block_scale(amax);
  const float id = q8_block_inverse(d);
  const f16_bits d16 = f32_to_f16(d);
  int sum = 0;
  for (int j = 0; j < kQK; ++j) {
    qs[j] = static_cast<int8_t>(std::round(x[j] * id));  // ties away from zero
    sum += qs[j];
  }
  return {d, d16, sum};
}

void quantize_q8_0(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) b[i].d = quantize_q8_block(src, b[i].qs).d16;
}

float vec_dot_q8_0_q8_0(int64_t n, const void* weights, const void* activations) {
  const auto* w = static_cast<const BlockQ8_0*>(weights);
  const auto* a = static_cast<const BlockQ8_0*>(activations);
  double sum = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK; ++j) sumi += w[i].qs[j] * a[i].qs[j];
    sum += static_cast<double>(f16_to_f32(w[i].d)) * f16_to_f32(a[i].d) * sumi;
  }
  return static_cast<float>(sum);
}

// ---- Q8_1 (activations only): value = q * d, s = d * sum(q) ---------------------------------

void dequantize_q8_1(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

void quantize_q8_1(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    const Q8BlockScale q = quantize_q8_block(src, b[i].qs);
    b[i].d = q.d16;
    b[i].s =
        f32_to_f16(static_cast<float>(q.sum) * q.d);  // from the unrounded d, as other tools do
  }
}

}  // namespace

void fill_legacy_scalar(KernelTable& table) {
  table[GgmlType::Q4_0] = {dequantize_q4_0, quantize_q4_0, vec_dot_q4_0_q8_0};
  table[GgmlType::Q4_1] = {dequantize_q4_1, quantize_q4_1, vec_dot_q4_1_q8_1};
  table[GgmlType::Q5_0] = {dequantize_q5_0, quantize_q5_0, vec_dot_q5_0_q8_0};
  table[GgmlType::Q5_1] = {dequantize_q5_1, quantize_q5_1, vec_dot_q5_1_q8_1};
  table[GgmlType::Q8_0] = {dequantize_q8_0, quantize_q8_0, vec_dot_q8_0_q8_0};
  table[GgmlType::Q8_1] = {dequantize_q8_1, quantize_q8_1, nullptr};
}

}  // namespace strata::quant
