// AVX-512 (F/BW/VL/DQ + VNNI) dot products of IQ4_NL (activations Q8_0) and IQ4_XS (activations
// Q8_K). IQ4_NL runs as quads (quad_avx512.h). IQ4_XS: the table lookup (_mm512_shuffle_epi8)
// yields the values offset by +128, so they are unsigned (1..241) and go straight into
// _mm512_dpbusd_epi32, which sums u8 x s8 products in int32 without saturation; the offset is taken
// back with 128 * sum(a) from the Q8_K block sums. Both follow the float order of their tile GEMMs.
// Dequantization falls back to the AVX2 kernels.

#include <immintrin.h>

#include "quant/chains_avx512.h"
#include "quant/kernel_table.h"
#include "quant/kquants_common.h"
#include "quant/multi_dot.h"
#include "quant/quad_avx512.h"
#include "quant/super_codes_avx512.h"

namespace strata::quant {
namespace {

#define STRATA_IQ4 inline __attribute__((always_inline))

inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// IQ4_XS in the float order of its tile GEMM (gemm_super_avx512.cpp, chains_avx512.h): per
// super-block, 128-bit lane k of the integer sum collects sub-blocks k and 4 + k times their
// scales, starting from their offset corrections -128 * scale * sum(a); its 4 dwords are added and
// chain k takes acc = fma(isum_k, d_w * d_a, acc) in float lanes 4k..4k+3.
struct MultiIq4xs {
  // One weight super-block, decoded once for all the columns it meets.
  struct Decoded {
    float d;
    __m256i neg_ls_words;
    __m512i v[4];
    __m512i scale[2];
  };
  // The activation super-block's values in the lanes of Decoded::v.
  struct Activation {
    __m512i a[4];
  };

  static STRATA_IQ4 Decoded decode(const BlockIQ4_XS& x) {
    const __m512i lanes0 = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m512i lanes1 = _mm512_add_epi32(lanes0, _mm512_set1_epi32(4));
    Decoded w;
    w.d = _cvtsh_ss(x.d);
    const __m256i ls = iq4xs_scales(x);
    // -128 * scale of sub-block s in both words of dword s (|value| <= 4096: an int16), so that
    // one vpmaddwd with the 16 block sums gives the offset corrections of the 8 sub-blocks.
    const __m256i neg_ls = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(ls, 7));
    w.neg_ls_words = _mm256_or_si256(_mm256_and_si256(neg_ls, _mm256_set1_epi32(0xffff)),
                                     _mm256_slli_epi32(neg_ls, 16));
    Iq4xsCodes::codes(x, w.v);
    const __m512i ls512 = _mm512_zextsi256_si512(ls);
    w.scale[0] = _mm512_permutexvar_epi32(lanes0, ls512);
    w.scale[1] = _mm512_permutexvar_epi32(lanes1, ls512);
    return w;
  }

  // One super-block of one column into acc.
  static STRATA_IQ4 void accumulate(const Decoded& w, const BlockQ8_K& b, const Activation& y,
                                    __m512& acc) {
    const float d = b.d * w.d;
    // Dword s of the corrections is sub-block s; the transpose moves it to lane s % 4.
    __m512i sum = _mm512_permutexvar_epi32(
        dword_transpose(),
        _mm512_zextsi256_si512(_mm256_madd_epi16(load256(b.bsums), w.neg_ls_words)));
    for (int c = 0; c < 2; ++c) {
      const __m512i s =
          _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), w.v[2 * c], y.a[2 * c]),
                              w.v[2 * c + 1], y.a[2 * c + 1]);
      sum = _mm512_add_epi32(sum, _mm512_mullo_epi32(s, w.scale[c]));
    }
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lane_totals(sum)), _mm512_set1_ps(d), acc);
  }

  static STRATA_IQ4 Activation activation(const BlockQ8_K& b) {
    Activation y;
    Iq4xsCodes::activations(b, y.a);
    return y;
  }

  template <int N>
  static void run(int64_t n, const void* w, const uint8_t* act, int64_t stride, float* out) {
    const auto* x = static_cast<const BlockIQ4_XS*>(w);
    const Columns<BlockQ8_K, N> y(act, stride);
    __m512 acc[N];
    for (int j = 0; j < N; ++j) acc[j] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / kQKK; ++i) {
      const Decoded d = decode(x[i]);
      for (int j = 0; j < N; ++j) accumulate(d, y[j][i], activation(y[j][i]), acc[j]);
    }
    for (int j = 0; j < N; ++j) out[j] = finish_chains(acc[j]);
  }

  // Decode's GEMV: the activation's super-blocks are laid out in the codes' lanes once per call
  // (four 512-bit lane shuffles each, which run<1> repeats for every row); every row then runs
  // run<1>'s operations in its order, so out[r] is vec_dot of row r bit for bit.
  static void gemv(int64_t n, const void* weights, int64_t row_stride, int64_t rows,
                   const void* activations, float* out) {
    if (rows <= 0) return;
    const auto* b = static_cast<const BlockQ8_K*>(activations);
    const int64_t nb = n / kQKK;
    Activation* laid_out = gemv_scratch<Activation>(nb);
    for (int64_t i = 0; i < nb; ++i) laid_out[i] = activation(b[i]);
    const auto* w = static_cast<const uint8_t*>(weights);
    for (int64_t r = 0; r < rows; ++r) {
      const auto* x = reinterpret_cast<const BlockIQ4_XS*>(w + r * row_stride);
      __m512 acc = _mm512_setzero_ps();
      for (int64_t i = 0; i < nb; ++i) accumulate(decode(x[i]), b[i], laid_out[i], acc);
      out[r] = finish_chains(acc);
    }
  }
};

#undef STRATA_IQ4

}  // namespace

void fill_iquants_avx512(KernelTable& table) {
  using Iq4nl = MultiQuad<NibbleQuads<Iq4nlValues>>;
  table[GgmlType::IQ4_NL].vec_dot = vec_dot_of<Iq4nl>;
  table[GgmlType::IQ4_XS].vec_dot = vec_dot_of<MultiIq4xs>;
  table[GgmlType::IQ4_NL].vec_dot_multi = vec_dot_multi_of<Iq4nl, 4>;
  table[GgmlType::IQ4_NL].gemv = Iq4nl::gemv;
  table[GgmlType::IQ4_XS].vec_dot_multi = vec_dot_multi_of<MultiIq4xs, 4>;
  table[GgmlType::IQ4_XS].gemv = MultiIq4xs::gemv;
}

}  // namespace strata::quant
