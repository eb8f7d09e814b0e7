#pragma once
// Family-private: the codes of the super-blocks with one signed integer scale per sub-block
// (IQ4_XS: 8 sub-blocks of 32, Q6_K: 16 of 16) in the layout their AVX-512 single-row kernels
// (iquants_avx512.cpp, kquants_avx512.cpp) and tile GEMMs (gemm_super_avx512.cpp) share. A format
// is a class with
//   using Block = ...;
//   static constexpr int kSubBlocks;   // 8 or 16
//   static constexpr int kOffset;      // code = value + kOffset (codes are unsigned bytes)
//   static void codes(const Block&, __m512i v[4]);
//   static void activations(const BlockQ8_K&, __m512i a[4]);
//   static __m512i scales(const Block&);          // int32 scale of sub-block s in dword s
//   static int32_t sub_block_sum(const BlockQ8_K&, int s);
// where 128-bit lane k of v[z] holds 16 codes of a sub-block s with s % 4 == k (IQ4_XS: sub-block
// 4 (z / 2) + k, elements 16 (z % 2) .. +15; Q6_K: sub-block 4z + k, elements 64z + 16k .. +15)
// and a[z] the activations of the same elements, so lane k only ever meets the sub-blocks of
// chain k (see chains_avx512.h).
//
// Internal linkage on purpose (see kquants_common.h); included only by files compiled for AVX-512.

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "quant/blocks.h"
#include "quant/iq4xs_scales.h"

namespace strata::quant {
namespace {

struct Iq4xsCodes {
  using Block = BlockIQ4_XS;
  static constexpr int kSubBlocks = 8;
  static constexpr int kOffset = 128;

  static void codes(const Block& b, __m512i v[4]) {
    // kIq4nlValues + 128 as unsigned bytes, in every 128-bit lane.
    const __m512i table = _mm512_xor_si512(
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues))),
        _mm512_set1_epi8(static_cast<char>(0x80)));
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    for (int c = 0; c < 2; ++c) {
      const __m512i q = _mm512_loadu_si512(b.qs + 64 * c);
      v[2 * c] = _mm512_shuffle_epi8(table, _mm512_and_si512(q, m4));
      v[2 * c + 1] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(q, 4), m4));
    }
  }
  static void activations(const BlockQ8_K& y, __m512i a[4]) {
    for (int c = 0; c < 2; ++c) {
      const __m512i a0 = _mm512_loadu_si512(y.qs + 128 * c);
      const __m512i a1 = _mm512_loadu_si512(y.qs + 128 * c + 64);
      a[2 * c] = _mm512_shuffle_i64x2(a0, a1, _MM_SHUFFLE(2, 0, 2, 0));
      a[2 * c + 1] = _mm512_shuffle_i64x2(a0, a1, _MM_SHUFFLE(3, 1, 3, 1));
    }
  }
  // Scale of sub-block s in dword s (s < 8; dwords 8..15 are 0).
  static __m512i scales(const Block& b) { return _mm512_zextsi256_si512(iq4xs_scales(b)); }
  static int32_t sub_block_sum(const BlockQ8_K& y, int s) {
    return y.bsums[2 * s] + y.bsums[2 * s + 1];
  }
};

struct Q6KCodes {
  using Block = BlockQ6_K;
  static constexpr int kSubBlocks = 16;
  static constexpr int kOffset = 32;

  // Elements 128h .. 128h + 63 (v[2h]) and 128h + 64 .. 128h + 127 (v[2h + 1]): the low 4 bits
  // from ql[64h + l] (low nibble for v[2h], high for v[2h + 1]), the high 2 bits from
  // qh[32h + l % 32] (bits 0-1 / 2-3 for l < 32 / >= 32 in v[2h], 4-5 / 6-7 in v[2h + 1]).
  static void codes(const Block& b, __m512i v[4]) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i m30 = _mm512_set1_epi8(0x30);
    constexpr __mmask32 kUpper = 0xffff0000u, kLower = 0x0000ffffu;
    for (int h = 0; h < 2; ++h) {
      const __m512i l = _mm512_loadu_si512(b.ql + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h)));
      const __m512i t = _mm512_slli_epi16(qh, 2);
      const __m512i h01 = _mm512_mask_slli_epi16(t, kLower, t, 2);
      const __m512i h23 = _mm512_mask_srli_epi16(qh, kUpper, qh, 2);
      v[2 * h] = _mm512_ternarylogic_epi32(_mm512_and_si512(l, m4), h01, m30, 0xf8);
      v[2 * h + 1] =
          _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4), h23, m30, 0xf8);
    }
  }
  static void activations(const BlockQ8_K& y, __m512i a[4]) {
    for (int z = 0; z < 4; ++z) a[z] = _mm512_loadu_si512(y.qs + 64 * z);
  }
  static __m512i scales(const Block& b) {
    return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
  }
  static int32_t sub_block_sum(const BlockQ8_K& y, int s) { return y.bsums[s]; }
};

}  // namespace
}  // namespace strata::quant
