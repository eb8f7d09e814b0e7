#pragma once
// Family-private helpers of the AVX-512 tile GEMMs: building tile vectors of 8 rows x 8 bytes and
// broadcasting 8 activation bytes to every row. Internal linkage on purpose (see
// kquants_common.h); included only by files compiled for AVX-512.

#include <immintrin.h>

#include <cstdint>

namespace strata::quant {
namespace {

// 8 activation bytes in every qword.
inline __m512i broadcast8(const int8_t* a) {
  int64_t v;
  __builtin_memcpy(&v, a, 8);
  return _mm512_set1_epi64(v);
}

// Rows side by side: out[g] holds bytes 8g .. 8g + 7 of the 32 at bytes_of(x[r]) for rows
// r = 0..7 (row r in qword r), a transpose of 8 rows x 4 qwords.
template <typename Block, typename BytesOf>
inline void transpose_rows(const Block* const* x, BytesOf bytes_of, __m512i out[4]) {
  const __m512i pick01 = _mm512_setr_epi64(0, 4, 8, 12, 1, 5, 9, 13);
  const __m512i pick23 = _mm512_setr_epi64(2, 6, 10, 14, 3, 7, 11, 15);
  __m512i z[4];
  for (int k = 0; k < 4; ++k) {
    z[k] = _mm512_inserti64x4(
        _mm512_castsi256_si512(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes_of(x[2 * k])))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes_of(x[2 * k + 1]))), 1);
  }
  const __m512i a01 = _mm512_permutex2var_epi64(z[0], pick01, z[1]);
  const __m512i a23 = _mm512_permutex2var_epi64(z[0], pick23, z[1]);
  const __m512i b01 = _mm512_permutex2var_epi64(z[2], pick01, z[3]);
  const __m512i b23 = _mm512_permutex2var_epi64(z[2], pick23, z[3]);
  out[0] = _mm512_shuffle_i64x2(a01, b01, _MM_SHUFFLE(1, 0, 1, 0));
  out[1] = _mm512_shuffle_i64x2(a01, b01, _MM_SHUFFLE(3, 2, 3, 2));
  out[2] = _mm512_shuffle_i64x2(a23, b23, _MM_SHUFFLE(1, 0, 1, 0));
  out[3] = _mm512_shuffle_i64x2(a23, b23, _MM_SHUFFLE(3, 2, 3, 2));
}
}  // namespace
}  // namespace strata::quant
