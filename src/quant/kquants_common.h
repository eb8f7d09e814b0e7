#pragma once
// Family-private helpers of the K-quant and IQ4 kernels: packing of the sub-block scales, shared by
// the scalar references and the SIMD kernels.
//
// Everything here has internal linkage on purpose: this header is compiled into files built for
// different instruction sets, and an inline function with external linkage could be merged by the
// linker into a copy that uses instructions the running CPU lacks.

#include <cstdint>
#include <cstring>

#include "quant/blocks.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace strata::quant {
namespace {

// Round to nearest, ties to even (the float rounding mode), for |x| < 2^22.
inline int nearest_int(float x) {
  const float shifted = x + 12582912.0f;  // 1.5 * 2^23: the integer lands in the low mantissa bits
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007fffff) - 0x00400000;
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// ---- Q4_K / Q5_K: 8 scales and 8 mins of 6 bits packed in 12 bytes b[0..11] ----
//   sub-block j < 4 : scale = b[j] & 63,                      min = b[j + 4] & 63
//   sub-block j >= 4: scale = (b[j + 4] & 15) | (b[j - 4] >> 6) << 4,
//                     min   = (b[j + 4] >> 4) | (b[j] >> 6) << 4
inline void unpack_k4_scales(const uint8_t* b, uint8_t* scales, uint8_t* mins) {
  for (int j = 0; j < 4; ++j) {
    scales[j] = b[j] & 63;
    mins[j] = b[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    scales[j] = static_cast<uint8_t>((b[j + 4] & 15) | ((b[j - 4] >> 6) << 4));
    mins[j] = static_cast<uint8_t>((b[j + 4] >> 4) | ((b[j] >> 6) << 4));
  }
}

inline void pack_k4_scales(const uint8_t* scales, const uint8_t* mins, uint8_t* b) {
  for (int j = 0; j < 4; ++j) {
    b[j] = static_cast<uint8_t>((scales[j] & 63) | ((scales[j + 4] >> 4) << 6));
    b[j + 4] = static_cast<uint8_t>((mins[j] & 63) | ((mins[j + 4] >> 4) << 6));
    b[j + 8] = static_cast<uint8_t>((scales[j + 4] & 15) | ((mins[j + 4] & 15) << 4));
  }
}

// The same unpacking four bytes at a time: out[0..1] = scales 0..7, out[2..3] = mins 0..7, one
// byte each (little-endian order).
inline void unpack_k4_scales_words(const uint8_t* b, uint32_t out[4]) {
  const uint32_t w0 = load_u32(b), w1 = load_u32(b + 4), w2 = load_u32(b + 8);
  out[0] = w0 & 0x3f3f3f3fu;
  out[1] = (w2 & 0x0f0f0f0fu) | ((w0 >> 2) & 0x30303030u);
  out[2] = w1 & 0x3f3f3f3fu;
  out[3] = ((w2 >> 4) & 0x0f0f0f0fu) | ((w1 >> 2) & 0x30303030u);
}

#if defined(__AVX2__)
// The same with vector instructions: bytes 0..7 = scales, bytes 8..15 = mins. Reads 16 bytes from
// b (the 4 bytes after the 12 packed ones are the next field of the block, and ignored).
inline __m128i unpack_k4_scales_vec(const uint8_t* b) {
  const __m128i w = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));  // w0 w1 w2 -
  // [w0, w2, w1, w2 >> 4] and [-, w0 >> 2, -, w1 >> 2]
  const __m128i x =
      _mm_srlv_epi32(_mm_shuffle_epi32(w, _MM_SHUFFLE(2, 1, 2, 0)), _mm_setr_epi32(0, 0, 0, 4));
  const __m128i y = _mm_srli_epi32(_mm_shuffle_epi32(w, _MM_SHUFFLE(1, 1, 0, 0)), 2);
  return _mm_or_si128(
      _mm_and_si128(x, _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f)),
      _mm_and_si128(y, _mm_setr_epi32(0, 0x30303030, 0, 0x30303030)));
}

// Two adjacent f16 (d, dmin) as floats in lanes 0 and 1.
inline __m128 load_f16_pair(const f16_bits* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(v)));
}
#endif

// ---- Q3_K: 16 signed scales of 6 bits (stored + 32) packed in 12 bytes b[0..11] ----
//   low 4 bits of scale i: i < 8 ? b[i] & 15 : b[i - 8] >> 4
//   high 2 bits of scale i: bits 2*(i / 4) .. 2*(i / 4) + 1 of b[8 + i % 4]
inline void unpack_q3k_scales(const uint8_t* b, int8_t* scales) {
  for (int i = 0; i < 16; ++i) {
    const int low = i < 8 ? (b[i] & 15) : (b[i - 8] >> 4);
    const int high = (b[8 + i % 4] >> (2 * (i / 4))) & 3;
    scales[i] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

inline void pack_q3k_scales(const int8_t* scales, uint8_t* b) {
  std::memset(b, 0, 12);
  for (int i = 0; i < 16; ++i) {
    const int v = scales[i] + 32;  // 0..63
    if (i < 8) {
      b[i] = static_cast<uint8_t>(b[i] | (v & 15));
    } else {
      b[i - 8] = static_cast<uint8_t>(b[i - 8] | ((v & 15) << 4));
    }
    b[8 + i % 4] = static_cast<uint8_t>(b[8 + i % 4] | ((v >> 4) << (2 * (i / 4))));
  }
}

// Four bytes at a time: out[k] holds scales 4k..4k+3 as unsigned 0..63 (subtract 32 per byte).
inline void unpack_q3k_scales_words(const uint8_t* b, uint32_t out[4]) {
  const uint32_t w0 = load_u32(b), w1 = load_u32(b + 4), w2 = load_u32(b + 8);
  out[0] = (w0 & 0x0f0f0f0fu) | ((w2 << 4) & 0x30303030u);
  out[1] = (w1 & 0x0f0f0f0fu) | ((w2 << 2) & 0x30303030u);
  out[2] = ((w0 >> 4) & 0x0f0f0f0fu) | (w2 & 0x30303030u);
  out[3] = ((w1 >> 4) & 0x0f0f0f0fu) | ((w2 >> 2) & 0x30303030u);
}

// ---- IQ4_XS: 8 signed scales of 6 bits (stored + 32): low 4 bits in nibble j % 2 of
// scales_l[j / 2], high 2 bits at bits 2j..2j+1 of scales_h ----
inline int iq4xs_scale(const BlockIQ4_XS& b, int j) {
  const int low = (b.scales_l[j / 2] >> (4 * (j % 2))) & 15;
  const int high = (b.scales_h >> (2 * j)) & 3;
  return (low | (high << 4)) - 32;
}

}  // namespace
}  // namespace strata::quant
