// AVX2 + FMA kernels of MXFP4 (activations Q8_0): the 4-bit codes become signed values through a
// _mm256_shuffle_epi8 table lookup, and signed x signed products go through _mm256_maddubs_epi16
// with the sign trick (|w| times a carrying the sign of w). |w| <= 12 and |a| <= 127, so the
// 16-bit pair sums never saturate. Also dequantization (exact: table value times a power of two).
//
// Every block field is read through a byte pointer with unaligned loads: 17-byte blocks put most
// blocks of a row at odd addresses.

#include <immintrin.h>

#include "quant/avx2_common.h"
#include "quant/kernel_table.h"
#include "quant/multi_dot.h"
#include "quant/mxfp4_common.h"

namespace strata::quant {
namespace {

// The 32 signed values of the block at p: elements 0..15 in the low lane, 16..31 in the high lane.
inline __m256i block_values(const uint8_t* p, __m256i table) {
  const __m128i q = load128(p + kMxfp4QsOffset);
  const __m256i idx =
      _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1),
                       _mm256_set1_epi8(0x0f));
  return _mm256_shuffle_epi8(table, idx);
}

// ---------------------------------------------------------------------------------------------
// Dot products, written for N activation rows at once (vec_dot_multi): each weight block is
// looked up once, then dotted with the N rows. vec_dot is the same kernel with one row, so both
// give bit-identical results for a row. Two accumulators per row (even and odd blocks) keep the
// one-row case from waiting on the latency of its adds.

struct MultiMxfp4 {
  template <int N>
  static void run(int64_t n, const void* w, const uint8_t* act, int64_t stride, float* out) {
    const auto* x = static_cast<const uint8_t*>(w);
    const __m256i table = _mm256_broadcastsi128_si256(load128(kMxfp4Values));
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc0[N], acc1[N];
    for (int j = 0; j < N; ++j) acc0[j] = acc1[j] = _mm256_setzero_ps();
    const int64_t nb = n / kQK;
    auto block = [&](int64_t i, __m256(&acc)[N]) __attribute__((always_inline)) {
      const uint8_t* xb = x + i * kMxfp4Bytes;
      const __m256i v = block_values(xb, table);
      const __m256i abs = _mm256_sign_epi8(v, v);
      const float dx = e8m0_half(xb[0]);
      for (int j = 0; j < N; ++j) {
        const uint8_t* yb = act + j * stride + i * kQ8_0Bytes;
        const __m256i a = _mm256_sign_epi8(load256(yb + kQ8_0QsOffset), v);
        const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(abs, a), ones);
        const float d = f16_to_f32(load_q8_0_d(yb)) * dx;
        acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(s), acc[j]);
      }
    };
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
      block(i, acc0);
      block(i + 1, acc1);
    }
    if (i < nb) block(i, acc0);
    for (int j = 0; j < N; ++j) out[j] = hsum(_mm256_add_ps(acc0[j], acc1[j]));
  }
};

// ---------------------------------------------------------------------------------------------
// Dequantization: same arithmetic as the reference (value * 2^(e - 128), exact).

void dequantize_mxfp4(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const uint8_t*>(src);
  const __m256i table = _mm256_broadcastsi128_si256(load128(kMxfp4Values));
  for (int64_t i = 0; i < n / kQK; ++i, x += kMxfp4Bytes, dst += kQK) {
    const __m256i v = block_values(x, table);
    const __m256 d = _mm256_set1_ps(e8m0_half(x[0]));
    const __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
    const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int k = 0; k < 4; ++k) {
      _mm256_storeu_ps(dst + 8 * k,
                       _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[k])), d));
    }
  }
}

}  // namespace

void fill_mxfp4_avx2(KernelTable& table) {
  // At most 4 rows per pass: 2 x 4 accumulators plus the looked-up block fit in 16 registers.
  table[GgmlType::MXFP4] = {dequantize_mxfp4, nullptr, vec_dot_of<MultiMxfp4>,
                            vec_dot_multi_of<MultiMxfp4, 4>};
}

}  // namespace strata::quant
