// AVX-512 (F/BW/VL/DQ + VNNI) kernels of MXFP4 (activations Q8_0). The table is symmetric, so the
// lookup (_mm512_shuffle_epi8) yields the magnitudes |w| (0..12, unsigned) and bit 3 of the code
// is the sign: the activations are negated under that mask, and _mm512_dpbusd_epi32 sums the
// u8 x s8 products in int32 without saturation (Q8_0 activations are never -128, so negation does
// not wrap). Two blocks (64 elements) per 512-bit vector. Also dequantization.
//
// Every block field is read through a byte pointer with unaligned loads: 17-byte blocks put most
// blocks of a row at odd addresses.

#include <immintrin.h>

#include "quant/kernel_table.h"
#include "quant/multi_dot.h"
#include "quant/mxfp4_common.h"

namespace strata::quant {
namespace {

inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}
inline __m128i load128(const void* p) {
  return _mm_loadu_si128(static_cast<const __m128i*>(p));
}

// |kMxfp4Values|: 0, 1, 2, 3, 4, 6, 8, 12 for codes 0..7 and again for 8..15.
inline __m128i magnitude_table() {
  return _mm_abs_epi8(load128(kMxfp4Values));
}

// ---------------------------------------------------------------------------------------------
// Dot products, written for N activation rows at once (vec_dot_multi): each pair of weight blocks
// is looked up once, then dotted with the N rows. vec_dot is the same kernel with one row, so both
// give bit-identical results for a row. Lanes 0..7 of a vector hold block i, lanes 8..15 block
// i + 1; an odd last block runs with the second half zero (zero values and zero scale). Two
// accumulators per row (alternate pairs of blocks) keep the one-row case from waiting on the
// latency of its FMAs.

struct MultiMxfp4 {
  template <int N, bool kPair>
  static inline __attribute__((always_inline)) void blocks(const uint8_t* xb, const uint8_t* act,
                                                           int64_t stride, int64_t i, __m512i table,
                                                           __m512 (&acc)[N]) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m128i q0 = load128(xb + kMxfp4QsOffset);
    const __m128i q1 = kPair ? load128(xb + kMxfp4Bytes + kMxfp4QsOffset) : _mm_setzero_si128();
    const __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(q0), q1, 1);
    // [q0, q1, q0 >> 4, q1 >> 4] -> [q0, q0 >> 4, q1, q1 >> 4]: the element order of the rows.
    const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1);
    const __m512i idx = _mm512_and_si512(_mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0)), m4);
    const __m512i u = _mm512_shuffle_epi8(table, idx);
    const __mmask64 negative = _mm512_test_epi8_mask(idx, _mm512_set1_epi8(8));
    const float dx0 = e8m0_half(xb[0]);
    const float dx1 = kPair ? e8m0_half(xb[kMxfp4Bytes]) : 0.0f;
    for (int j = 0; j < N; ++j) {
      const uint8_t* yb = act + j * stride + i * kQ8_0Bytes;
      const __m256i a0 = load256(yb + kQ8_0QsOffset);
      const __m256i a1 = kPair ? load256(yb + kQ8_0Bytes + kQ8_0QsOffset) : _mm256_setzero_si256();
      __m512i a = _mm512_inserti64x4(_mm512_castsi256_si512(a0), a1, 1);
      a = _mm512_mask_sub_epi8(a, negative, _mm512_setzero_si512(), a);
      const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, a);
      const float d0 = f16_to_f32(load_q8_0_d(yb)) * dx0;
      const float d1 = kPair ? f16_to_f32(load_q8_0_d(yb + kQ8_0Bytes)) * dx1 : 0.0f;
      const __m512 scale =
          _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(d0)), _mm256_set1_ps(d1), 1);
      acc[j] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(s), acc[j]);
    }
  }

  template <int N>
  static void run(int64_t n, const void* w, const uint8_t* act, int64_t stride, float* out) {
    const auto* x = static_cast<const uint8_t*>(w);
    const __m512i table = _mm512_broadcast_i32x4(magnitude_table());
    __m512 acc0[N], acc1[N];
    for (int j = 0; j < N; ++j) acc0[j] = acc1[j] = _mm512_setzero_ps();
    const int64_t nb = n / kQK;
    int64_t i = 0;
    for (; i + 3 < nb; i += 4) {
      blocks<N, true>(x + i * kMxfp4Bytes, act, stride, i, table, acc0);
      blocks<N, true>(x + (i + 2) * kMxfp4Bytes, act, stride, i + 2, table, acc1);
    }
    if (i + 1 < nb) {
      blocks<N, true>(x + i * kMxfp4Bytes, act, stride, i, table, acc0);
      i += 2;
    }
    if (i < nb) blocks<N, false>(x + i * kMxfp4Bytes, act, stride, i, table, acc1);
    for (int j = 0; j < N; ++j) out[j] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[j], acc1[j]));
  }
};

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
  table[GgmlType::MXFP4] = {dequantize_mxfp4, nullptr, vec_dot_of<MultiMxfp4>,
                            vec_dot_multi_of<MultiMxfp4>};
}

}  // namespace strata::quant
