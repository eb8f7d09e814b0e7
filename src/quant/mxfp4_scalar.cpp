// Scalar reference kernels of MXFP4: blocks of 32 elements, one E8M0 exponent byte e and 16 bytes
// of 4-bit codes; value = kMxfp4Values[q] * 2^(e - 128). Activations in Q8_0. Ground truth for the
// faster levels: written for clarity.
//
// Element j (0..15) is the low nibble of qs[j], element j + 16 the high nibble of qs[j].

#include <algorithm>
#include <cmath>

#include "quant/kernel_table.h"
#include "quant/mxfp4_common.h"

namespace strata::quant {
namespace {

int code(const uint8_t* qs, int j) {
  return (qs[j % 16] >> (4 * (j / 16))) & 15;
}

// ---------------------------------------------------------------------------------------------
// Dequantization and dot product. kMxfp4Values[q] * 2^(e - 128) is exact (a small integer times
// a power of two) unless it overflows, so every level decodes to the same floats.

void dequantize_mxfp4(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t ib = 0; ib < n / kQK; ++ib, p += kMxfp4Bytes, dst += kQK) {
    const float d = e8m0_half(p[0]);
    const uint8_t* qs = p + kMxfp4QsOffset;
    for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(kMxfp4Values[code(qs, j)]) * d;
  }
}

// Per block: the integer sum of kMxfp4Values[q] * a, times (Q8_0 d as float * 2^(e - 128)),
// added to a float sum, as the other GGUF engines compute it.
float vec_dot_mxfp4(int64_t n, const void* w, const void* act) {
  const auto* x = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const uint8_t*>(act);
  float sum = 0;
  for (int64_t ib = 0; ib < n / kQK; ++ib, x += kMxfp4Bytes, y += kQ8_0Bytes) {
    const uint8_t* qs = x + kMxfp4QsOffset;
    const auto* a = reinterpret_cast<const int8_t*>(y + kQ8_0QsOffset);
    int32_t isum = 0;
    for (int j = 0; j < kQK; ++j) isum += kMxfp4Values[code(qs, j)] * a[j];
    const float d = f16_to_f32(load_q8_0_d(y)) * e8m0_half(x[0]);
    sum += d * static_cast<float>(isum);
  }
  return sum;
}

// ---------------------------------------------------------------------------------------------
// Quantization (the reference weight quantizer, bit-compatible with the other GGUF tools).
//
// Exponent: e = floor(log2(amax)) - 2 + 127, so the scale s = 2^(e - 128) puts amax / s in [8, 16)
// (the largest code magnitude is 12: amax / s in (12, 16) saturates to 12). floor(log2(amax)) is
// read exactly from frexp (amax = m * 2^k with m in [0.5, 1): floor(log2(amax)) = k - 1) rather
// than from a rounded log2f, which rounds up for amax a few ulps below a power of two. e is clamped
// to [0, 254]: blocks with amax < 2^-125 use the smallest scale; an infinite amax takes e = 254. An
// all-zero block (or one of NaNs) has e = 0 and zero codes.
//
// Codes: the nearest of |x| / s to the magnitudes 0, 1, 2, 3, 4, 6, 8, 12, ties to the smaller
// magnitude, with the sign bit set only for a non-zero magnitude of a negative x (zero is always
// code 0, never the "negative zero" code 8). This is the rule of the other tools' reference
// quantizer (the first table entry with the smallest |v * s - x|, in table order): |x| / s is exact
// (a power-of-two scaling), and their float differences of adjacent candidates are exact
// (Sterbenz), so both rules pick the same code for every input.
//
// Round trip: a block this quantizer produced decodes to values it maps back to the same bytes
// (its largest magnitude is 8 or 12, so the exponent is found again). Other blocks decode to
// values that requantize to the same values but maybe other bytes: code 8 becomes code 0, and a
// block whose largest magnitude is below 8 gets a smaller exponent with doubled codes.

uint8_t block_exponent(float amax) {
  if (!(amax > 0)) return 0;
  if (std::isinf(amax)) return 254;
  int k = 0;
  std::frexp(amax, &k);
  return static_cast<uint8_t>(std::clamp((k - 1) - 2 + 127, 0, 254));
}

// Index (0..7) of the magnitude nearest to t >= 0: the number of midpoints between adjacent
// magnitudes that t exceeds (a tie stays below: the smaller magnitude). NaN gives 0.
int nearest_magnitude(float t) {
  constexpr float kMidpoints[7] = {0.5f, 1.5f, 2.5f, 3.5f, 5.0f, 7.0f, 10.0f};
  int m = 0;
  for (float mid : kMidpoints) m += t > mid ? 1 : 0;
  return m;
}

void quantize_mxfp4(const float* src, void* dst, int64_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t ib = 0; ib < n / kQK; ++ib, src += kQK, p += kMxfp4Bytes) {
    float amax = 0;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(src[j]));
    const uint8_t e = block_exponent(amax);
    p[0] = e;
    uint8_t* qs = p + kMxfp4QsOffset;
    std::memset(qs, 0, kQK / 2);
    for (int j = 0; j < kQK; ++j) {
      // |x| * 2^(128 - e), exact (ldexp does not go through the possibly subnormal scale).
      const int m = nearest_magnitude(std::ldexp(std::fabs(src[j]), 128 - e));
      const int q = m != 0 && std::signbit(src[j]) ? m | 8 : m;
      qs[j % 16] = static_cast<uint8_t>(qs[j % 16] | (q << (4 * (j / 16))));
    }
  }
}

}  // namespace

void fill_mxfp4_scalar(KernelTable& table) {
  table[GgmlType::MXFP4] = {dequantize_mxfp4, quantize_mxfp4, vec_dot_mxfp4};
}

}  // namespace strata::quant
