// AVX-512 (F/BW/VL/DQ + VNNI) dot products of IQ4_NL (activations Q8_0) and IQ4_XS (activations
// Q8_K). The table lookup (_mm512_shuffle_epi8) yields the values offset by +128, so they are
// unsigned (1..241) and go straight into _mm512_dpbusd_epi32, which sums u8 x s8 products in int32
// without saturation; the offset is taken back with 128 * sum(a): from the Q8_K block sums for
// IQ4_XS, and from a second dpbusd for IQ4_NL. Dequantization falls back to the AVX2 kernels.

#include <immintrin.h>

#include "quant/kernel_table.h"
#include "quant/kquants_common.h"
#include "quant/multi_dot.h"

namespace strata::quant {
namespace {

inline __m512i load512(const void* p) {
  return _mm512_loadu_si512(p);
}
inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}
inline __m128i load128(const void* p) {
  return _mm_loadu_si128(static_cast<const __m128i*>(p));
}

// kIq4nlValues + 128, as unsigned bytes.
inline __m128i offset_table() {
  return _mm_xor_si128(load128(kIq4nlValues), _mm_set1_epi8(static_cast<char>(0x80)));
}

// ---------------------------------------------------------------------------------------------
// Dot products, written for N activation rows at once (vec_dot_multi): each weight block is looked
// up once (values and scales in registers), then dotted with the N rows. vec_dot is the same
// kernel with one row, so both give bit-identical results for a row.

struct MultiIq4nl {
  template <int N>
  static void run(int64_t n, const void* w, const uint8_t* act, int64_t stride, float* out) {
    const auto* x = static_cast<const BlockIQ4_NL*>(w);
    const Columns<BlockQ8_0, N> y(act, stride);
    const __m512i table = _mm512_broadcast_i32x4(offset_table());
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
    const __m512i halves = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    __m512 acc[N];
    for (int j = 0; j < N; ++j) acc[j] = _mm512_setzero_ps();
    const int64_t nb = n / kQK;
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
      const __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(x[i].qs)),
                                                load128(x[i + 1].qs), 1);
      const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1);
      const __m512i idx = _mm512_and_si512(_mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0)), m4);
      const __m512i u = _mm512_shuffle_epi8(table, idx);
      const __m128 dx = _mm_cvtph_ps(_mm_setr_epi16(
          static_cast<short>(x[i].d), static_cast<short>(x[i + 1].d), 0, 0, 0, 0, 0, 0));
      for (int j = 0; j < N; ++j) {
        const BlockQ8_0* b = y[j] + i;
        const __m512i a =
            _mm512_inserti64x4(_mm512_castsi256_si512(load256(b[0].qs)), load256(b[1].qs), 1);
        const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, a);
        const __m512i offset = _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, a);
        const __m128 dy = _mm_cvtph_ps(_mm_setr_epi16(
            static_cast<short>(b[0].d), static_cast<short>(b[1].d), 0, 0, 0, 0, 0, 0));
        const __m128 prod = _mm_mul_ps(dx, dy);
        const __m512 scale = _mm512_permutexvar_ps(halves, _mm512_castps128_ps512(prod));
        acc[j] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(_mm512_sub_epi32(s, offset)), acc[j]);
      }
    }
    for (int j = 0; j < N; ++j) {
      float sum = _mm512_reduce_add_ps(acc[j]);
      if (i < nb) {
        const __m128i q = load128(x[i].qs);
        const __m256i idx = _mm256_and_si256(
            _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1),
            _mm256_set1_epi8(0x0f));
        const __m256i a = load256(y[j][i].qs);
        const __m256i s = _mm256_dpbusd_epi32(
            _mm256_setzero_si256(), _mm256_shuffle_epi8(_mm512_castsi512_si256(table), idx), a);
        const __m256i offset =
            _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm512_castsi512_si256(bias), a);
        const __m256i d = _mm256_sub_epi32(s, offset);
        __m128i t = _mm_add_epi32(_mm256_castsi256_si128(d), _mm256_extracti128_si256(d, 1));
        t = _mm_add_epi32(t, _mm_shuffle_epi32(t, _MM_SHUFFLE(1, 0, 3, 2)));
        t = _mm_add_epi32(t, _mm_shuffle_epi32(t, _MM_SHUFFLE(2, 3, 0, 1)));
        sum +=
            f16_to_f32(x[i].d) * f16_to_f32(y[j][i].d) * static_cast<float>(_mm_cvtsi128_si32(t));
      }
      out[j] = sum;
    }
  }
};

struct MultiIq4xs {
  template <int N>
  static void run(int64_t n, const void* w, const uint8_t* act, int64_t stride, float* out) {
    const auto* x = static_cast<const BlockIQ4_XS*>(w);
    const Columns<BlockQ8_K, N> y(act, stride);
    const __m512i table = _mm512_broadcast_i32x4(offset_table());
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m256i low_shift = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    const __m256i high_shift = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    const __m512i lanes0 = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m512i lanes1 = _mm512_add_epi32(lanes0, _mm512_set1_epi32(4));
    __m512 acc0[N], acc1[N];
    for (int j = 0; j < N; ++j) acc0[j] = acc1[j] = _mm512_setzero_ps();
    auto block = [&](int64_t i, __m512(&acc)[N]) __attribute__((always_inline)) {
      const float xd = _cvtsh_ss(x[i].d);
      uint32_t low;
      std::memcpy(&low, x[i].scales_l, sizeof low);
      const __m256i ls = _mm256_sub_epi32(
          _mm256_or_si256(
              _mm256_and_si256(
                  _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(low)), low_shift),
                  _mm256_set1_epi32(15)),
              _mm256_slli_epi32(
                  _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(x[i].scales_h), high_shift),
                                   _mm256_set1_epi32(3)),
                  4)),
          _mm256_set1_epi32(32));
      const __m256i neg_ls = _mm256_sub_epi32(_mm256_setzero_si256(), ls);
      const __m512i ls512 = _mm512_zextsi256_si512(ls);
      __m512i ul[2], uh[2], scale[2];
      for (int c = 0; c < 2; ++c) {
        const __m512i q = load512(x[i].qs + 64 * c);
        ul[c] = _mm512_shuffle_epi8(table, _mm512_and_si512(q, m4));
        uh[c] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(q, 4), m4));
        scale[c] = _mm512_permutexvar_epi32(c == 0 ? lanes0 : lanes1, ls512);
      }
      for (int j = 0; j < N; ++j) {
        const BlockQ8_K& b = y[j][i];
        const float d = b.d * xd;
        const __m256i a_sums = _mm256_madd_epi16(load256(b.bsums), _mm256_set1_epi16(1));
        __m512i sum =
            _mm512_zextsi256_si512(_mm256_slli_epi32(_mm256_mullo_epi32(a_sums, neg_ls), 7));
        for (int c = 0; c < 2; ++c) {
          const __m512i a0 = load512(b.qs + 128 * c), a1 = load512(b.qs + 128 * c + 64);
          const __m512i al = _mm512_shuffle_i64x2(a0, a1, _MM_SHUFFLE(2, 0, 2, 0));
          const __m512i ah = _mm512_shuffle_i64x2(a0, a1, _MM_SHUFFLE(3, 1, 3, 1));
          const __m512i s = _mm512_dpbusd_epi32(
              _mm512_dpbusd_epi32(_mm512_setzero_si512(), ul[c], al), uh[c], ah);
          sum = _mm512_add_epi32(sum, _mm512_mullo_epi32(s, scale[c]));
        }
        acc[j] = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sum), acc[j]);
      }
    };
    const int64_t nb = n / kQKK;
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
      block(i, acc0);
      block(i + 1, acc1);
    }
    if (i < nb) block(i, acc0);
    for (int j = 0; j < N; ++j) out[j] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[j], acc1[j]));
  }
};

}  // namespace

void fill_iquants_avx512(KernelTable& table) {
  table[GgmlType::IQ4_NL].vec_dot = vec_dot_of<MultiIq4nl>;
  table[GgmlType::IQ4_XS].vec_dot = vec_dot_of<MultiIq4xs>;
  table[GgmlType::IQ4_NL].vec_dot_multi = vec_dot_multi_of<MultiIq4nl, 4>;
  table[GgmlType::IQ4_XS].vec_dot_multi = vec_dot_multi_of<MultiIq4xs, 4>;
}

}  // namespace strata::quant
