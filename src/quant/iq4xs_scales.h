#pragma once
// The eight IQ4_XS sub-block scales as int32, shared by the files compiled for AVX2 and for
// AVX-512 (internal linkage, as in legacy_common.h: each including file gets its own copy built
// with its flags).

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "quant/blocks.h"

namespace strata::quant {
namespace {

// Scale of sub-block s in dword s: 6 bits (4 in scales_l, 2 in scales_h) minus 32.
inline __m256i iq4xs_scales(const BlockIQ4_XS& b) {
  uint32_t low;
  std::memcpy(&low, b.scales_l, sizeof low);
  const __m256i lows =
      _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(low)),
                                         _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                       _mm256_set1_epi32(15));
  const __m256i highs =
      _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(b.scales_h),
                                         _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                       _mm256_set1_epi32(3));
  return _mm256_sub_epi32(_mm256_or_si256(lows, _mm256_slli_epi32(highs, 4)),
                          _mm256_set1_epi32(32));
}

}  // namespace
}  // namespace strata::quant
