// AVX-512 (F/BW/VL/DQ + VNNI) kernels of MXFP4 (activations Q8_0): the dot products run as quads
// (quad_avx512.h: the table lookup gives the signed values, 2^(e - 128) the block scale), in the
// float order of the tile GEMM. Also dequantization.
//
// Every block field is read through a byte pointer with unaligned loads: 17-byte blocks put most
// blocks of a row at odd addresses.

#include <immintrin.h>

#include "quant/kernel_table.h"
#include "quant/multi_dot.h"
#include "quant/mxfp4_common.h"
#include "quant/quad_avx512.h"

namespace strata::quant {
namespace {

inline __m128i load128(const void* p) {
  return _mm_loadu_si128(static_cast<const __m128i*>(p));
}

// ---------------------------------------------------------------------------------------------
// Dequantization: same arithmetic as the reference (value * 2^(e - 128), exact).

void dequantize_mxfp4(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const uint8_t*>(src);
  const __m128i table = load128(kMxfp4Values);
  const __m128i m4 = _mm_set1_epi8(0x0f);
  for (int64_t i = 0; i < n / kQK; ++i, x += kMxfp4Bytes, dst += kQK) {
    const __m128i q = load128(x + kMxfp4QsOffset);
    const __m512 d = _mm512_set1_ps(e8m0_half(x[0]));
    const __m128i lo = _mm_shuffle_epi8(table, _mm_and_si128(q, m4));
    const __m128i hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(q, 4), m4));
    _mm512_storeu_ps(dst, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo)), d));
    _mm512_storeu_ps(dst + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi)), d));
  }
}

}  // namespace

void fill_mxfp4_avx512(KernelTable& table) {
  using Mxfp4 = MultiQuad<NibbleQuads<Mxfp4Values>>;
  table[GgmlType::MXFP4] = {dequantize_mxfp4, nullptr, vec_dot_of<Mxfp4>,
                            vec_dot_multi_of<Mxfp4, 4>, Mxfp4::gemv};
}

}  // namespace strata::quant
