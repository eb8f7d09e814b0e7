// AVX-512 (F/BW/VL/DQ + VNNI) kernels of the K-quants: dot products with Q8_K activations on
// 512-bit vectors, 64 elements at a time, for one or several activation rows (vec_dot_multi).
// Weight quants (unsigned) times activations (signed) with _mm512_maddubs_epi16 (Q4_K / Q5_K:
// _mm512_dpbusd_epi32, see there); the 16-bit pair sums never saturate for these formats (at most
// 2 * 63 * 128), and _mm512_dpwssd_epi32 multiplies them by the sub-block scales and accumulates in
// int32 in one instruction. Mins and offsets come in through the activation block sums. Also the
// Q8_K activation quantizer. Dequantization falls back to the AVX2 kernels.

#include <immintrin.h>

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "quant/chains_avx512.h"
#include "quant/kernel_table.h"
#include "quant/kquants_common.h"
#include "quant/multi_dot.h"
#include "quant/super_codes_avx512.h"

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
// A 32-byte block in both halves of a 512-bit vector.
inline __m512i load256_twice(const void* p) {
  return _mm512_broadcast_i64x4(load256(p));
}

// 16-bit lanes of the upper / lower 256 bits.
constexpr __mmask32 kUpper = 0xffff0000u;
constexpr __mmask32 kLower = 0x0000ffffu;

// Byte-shuffle masks over a vector whose four 128-bit lanes hold the same eight int16 values:
//   lanes_lo / lanes_hi: lane L becomes value L / value 4 + L (one scale per 16 elements);
//   pairs[q]: in lane L, words 0..3 become value 4q + L / 2, words 4..7 value 4q + 2 + L / 2 (the
//             scales of Q4_K / Q5_K sub-blocks 2p + L / 2 for p = 2q, 2q + 1, in the word order
//             of _mm512_packs_epi32).
struct Masks {
  alignas(64) uint8_t lanes_lo[64];
  alignas(64) uint8_t lanes_hi[64];
  alignas(64) uint8_t pairs[2][64];
};
constexpr Masks make_masks() {
  Masks m{};
  for (int b = 0; b < 64; ++b) {
    const int lane = b / 16, byte = b % 2;
    m.lanes_lo[b] = static_cast<uint8_t>(2 * lane + byte);
    m.lanes_hi[b] = static_cast<uint8_t>(2 * (4 + lane) + byte);
    for (int q = 0; q < 2; ++q) {
      const int word = (b % 16) / 2;
      m.pairs[q][b] = static_cast<uint8_t>(2 * (4 * q + 2 * (word / 4) + lane / 2) + byte);
    }
  }
  return m;
}
constexpr Masks kMasks = make_masks();

inline float hsum128(__m128 v) {
  v = _mm_add_ps(v, _mm_movehl_ps(v, v));
  v = _mm_add_ss(v, _mm_movehdup_ps(v));
  return _mm_cvtss_f32(v);
}
inline float hsum256(__m256 v) {
  return hsum128(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)));
}

// ---------------------------------------------------------------------------------------------
// Dot products, written for N activation rows at once (vec_dot_multi): each weight super-block is
// decoded once (quants, scales, mins in registers), then dotted with the N rows. vec_dot is the
// same kernel with one row, so both give bit-identical results for a row.

#define STRATA_INLINE inline __attribute__((always_inline))

// Quants of a super-block of 16 groups of 16 (Q2_K, Q3_K, Q6_K) with their scales:
// v[2h], v[2h + 1] = elements 128h .. 128h+63, 128h+64 .. 128h+127, s[k] the int16 scales of v[k]
// spread over its lanes (lane L of v[2h] holds group 8h + L, of v[2h + 1] group 8h + 4 + L).
struct Groups16 {
  __m512i v[4];
  __m512i s[4];
  STRATA_INLINE void set_scales(__m256i sc16) {
    for (int h = 0; h < 2; ++h) {
      const __m512i sc = _mm512_broadcast_i32x4(h == 0 ? _mm256_castsi256_si128(sc16)
                                                       : _mm256_extracti128_si256(sc16, 1));
      s[2 * h] = _mm512_shuffle_epi8(sc, load512(kMasks.lanes_lo));
      s[2 * h + 1] = _mm512_shuffle_epi8(sc, load512(kMasks.lanes_hi));
    }
  }
  // sum(sc_j * q_j * a_j) over the 16 groups against one activation block, added to init. With
  // few columns two dependency chains, else one (the columns are independent chains).
  template <int N>
  STRATA_INLINE __m512i dot(__m512i init, const int8_t* a) const {
    __m512i sum0 = _mm512_dpwssd_epi32(init, _mm512_maddubs_epi16(v[0], load512(a)), s[0]);
    if constexpr (N <= 2) {
      __m512i sum1 = _mm512_dpwssd_epi32(_mm512_setzero_si512(),
                                         _mm512_maddubs_epi16(v[2], load512(a + 128)), s[2]);
      sum0 = _mm512_dpwssd_epi32(sum0, _mm512_maddubs_epi16(v[1], load512(a + 64)), s[1]);
      sum1 = _mm512_dpwssd_epi32(sum1, _mm512_maddubs_epi16(v[3], load512(a + 192)), s[3]);
      return _mm512_add_epi32(sum0, sum1);
    } else {
      for (int k = 1; k < 4; ++k) {
        sum0 = _mm512_dpwssd_epi32(sum0, _mm512_maddubs_epi16(v[k], load512(a + 64 * k)), s[k]);
      }
      return sum0;
    }
  }
};

struct MultiQ2K {
  template <int N>
  static void run(int64_t n, const void* w, const uint8_t* act, int64_t stride, float* out) {
    const auto* x = static_cast<const BlockQ2_K*>(w);
    const Columns<BlockQ8_K, N> y(act, stride);
    const __m512i m3 = _mm512_set1_epi8(3);
    const __m128i m4 = _mm_set1_epi8(0x0f);
    __m512 acc[N];
    __m256 acc_m[N];
    for (int j = 0; j < N; ++j) {
      acc[j] = _mm512_setzero_ps();
      acc_m[j] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < n / kQKK; ++i) {
      const float xd = f16_to_f32(x[i].d), xmin = f16_to_f32(x[i].dmin);
      const __m128i sm = load128(x[i].scales);
      const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), m4));
      Groups16 g;
      g.set_scales(_mm256_cvtepu8_epi16(_mm_and_si128(sm, m4)));
      for (int h = 0; h < 2; ++h) {
        const __m512i qb = load256_twice(x[i].qs + 32 * h);
        const __m512i q = _mm512_mask_srli_epi16(qb, kUpper, qb, 2);
        g.v[2 * h] = _mm512_and_si512(q, m3);
        g.v[2 * h + 1] = _mm512_and_si512(_mm512_srli_epi16(q, 4), m3);
      }
      for (int j = 0; j < N; ++j) {
        const BlockQ8_K& b = y[j][i];
        const float d = b.d * xd, dmin = b.d * xmin;
        const __m256i prod_m = _mm256_madd_epi16(mins, load256(b.bsums));
        acc_m[j] = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(prod_m), acc_m[j]);
        const __m512i sum = g.template dot<N>(_mm512_setzero_si512(), b.qs);
        acc[j] = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sum), acc[j]);
      }
    }
    for (int j = 0; j < N; ++j) out[j] = _mm512_reduce_add_ps(acc[j]) - hsum256(acc_m[j]);
  }
};

struct MultiQ3K {
  template <int N>
  static void run(int64_t n, const void* w, const uint8_t* act, int64_t stride, float* out) {
    const auto* x = static_cast<const BlockQ3_K*>(w);
    const Columns<BlockQ8_K, N> y(act, stride);
    const __m512i m3 = _mm512_set1_epi8(3);
    const __m512i four = _mm512_set1_epi8(4);
    __m512i hsel[4];
    for (int f = 0; f < 4; ++f) {
      hsel[f] = _mm512_mask_blend_epi8(0xffffffff00000000ull,
                                       _mm512_set1_epi8(static_cast<char>(1 << (2 * f))),
                                       _mm512_set1_epi8(static_cast<char>(1 << (2 * f + 1))));
    }
    __m512 acc[N];
    for (int j = 0; j < N; ++j) acc[j] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / kQKK; ++i) {
      const float xd = f16_to_f32(x[i].d);
      uint32_t sw[4];
      unpack_q3k_scales_words(x[i].scales, sw);
      const __m128i sc8 =
          _mm_sub_epi8(_mm_set_epi32(static_cast<int>(sw[3]), static_cast<int>(sw[2]),
                                     static_cast<int>(sw[1]), static_cast<int>(sw[0])),
                       _mm_set1_epi8(32));
      const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
      const __m512i neg4 = _mm512_zextsi256_si512(_mm256_mullo_epi16(sc16, _mm256_set1_epi16(-4)));
      Groups16 g;
      g.set_scales(sc16);
      const __m512i hm = load256_twice(x[i].hmask);
      for (int h = 0; h < 2; ++h) {
        const __m512i qb = load256_twice(x[i].qs + 32 * h);
        const __m512i q = _mm512_mask_srli_epi16(qb, kUpper, qb, 2);
        __m512i v01 = _mm512_and_si512(q, m3);
        __m512i v23 = _mm512_and_si512(_mm512_srli_epi16(q, 4), m3);
        g.v[2 * h] = _mm512_mask_add_epi8(v01, _mm512_test_epi8_mask(hm, hsel[2 * h]), v01, four);
        g.v[2 * h + 1] =
            _mm512_mask_add_epi8(v23, _mm512_test_epi8_mask(hm, hsel[2 * h + 1]), v23, four);
      }
      for (int j = 0; j < N; ++j) {
        const BlockQ8_K& b = y[j][i];
        const float d = b.d * xd;
        const __m512i init = _mm512_dpwssd_epi32(_mm512_setzero_si512(), neg4,
                                                 _mm512_zextsi256_si512(load256(b.bsums)));
        const __m512i sum = g.template dot<N>(init, b.qs);
        acc[j] = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sum), acc[j]);
      }
    }
    for (int j = 0; j < N; ++j) out[j] = _mm512_reduce_add_ps(acc[j]);
  }
};

// Q4_K / Q5_K; vec_dot is this kernel with one column. Its float operations are those of the tile
// GEMM (gemm_k4_avx512.cpp) for one (row, column), so that decode, the multi-row dot products and
// prompt processing agree bit for bit. Per super-block the integer sums go to two halves:
//   Q4_K: isum A = sub-blocks 0, 2, 4, 6, B = 1, 3, 5, 7 (each times its scale);
//   Q5_K: isum A = elements 0..15 of every sub-block, B = elements 16..31;
//   both: imin A = sub-blocks 0, 1, 4, 5 (min times activation sum), B = 2, 3, 6, 7;
// then four float chains, super-blocks in order: acc = fma(isum, d_a * d, acc) per half and
// acc_m = fma(imin, d_a * dmin, acc_m) per half (d_a * d first, as the earlier kernels did;
// scaling by d first then by d_a flipped an oracle row); the result is (acc A + acc B) -
// (acc_m A + acc_m B). The integer sums are exact in any order.
// The 64 quants of sub-blocks 2p (lower 256 bits) and 2p + 1 (upper) times the activations with
// _mm512_dpbusd_epi32: each int32 lane sums 4 products (|sum| <= 4 * 31 * 128, an int16).
// _mm512_packs_epi32 puts the lanes of p = 2q and 2q + 1 into the int16 halves of one int32 lane
// (exact), and _mm512_dpwssd_epi32 multiplies both by their sub-block scales: 6 instead of 8
// multiplies. 128-bit lane L then holds sub-blocks 2p + L / 2, and for Q5_K elements 16 (L % 2)
// .. 16 (L % 2) + 15 of them.
template <bool kFiveBit>
struct MultiK4Like {
  using Block = std::conditional_t<kFiveBit, BlockQ5_K, BlockQ4_K>;

  // One weight super-block in registers.
  struct Decoded {
    __m512i v[4];           // [low nibbles, high nibbles] of qs[32p..32p+31] (+ fifth bits)
    __m512i pair_scale[2];  // scales in the word order of _mm512_packs_epi32(t[2q], t[2q + 1])
    __m256i mins;           // m0 m0 m1 m1 .. m7 m7 (int16), against the 16 block sums
  };

  static STRATA_INLINE Decoded decode(const Block& b, const __m512i (&hsel)[4]) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    Decoded x;
    const __m128i sm = unpack_k4_scales_vec(b.scales);  // bytes: scales 0..7, mins 0..7
    x.mins = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));
    const __m512i sc = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(sm));
    __m512i hb;
    if constexpr (kFiveBit) hb = load256_twice(b.qh);
    for (int p = 0; p < 4; ++p) {
      const __m512i qb = load256_twice(b.qs + 32 * p);
      x.v[p] = _mm512_and_si512(_mm512_mask_srli_epi16(qb, kUpper, qb, 4), m4);
      if constexpr (kFiveBit) {
        x.v[p] = _mm512_mask_add_epi8(x.v[p], _mm512_test_epi8_mask(hb, hsel[p]), x.v[p],
                                      _mm512_set1_epi8(0x10));
      }
    }
    for (int q = 0; q < 2; ++q) x.pair_scale[q] = _mm512_shuffle_epi8(sc, load512(kMasks.pairs[q]));
    return x;
  }

  // Scaled quant sums (16 int32 lanes; 128-bit lane L: sub-blocks 2p + L / 2, Q5_K elements
  // 16 (L % 2) .. 16 (L % 2) + 15 of them) and min products (lane s: sub-block s).
  static STRATA_INLINE void sums(const Decoded& x, const BlockQ8_K& b, __m512i& sum,
                                 __m256i& imin) {
    const __m512i z = _mm512_setzero_si512();
    __m512i t[4];
    for (int p = 0; p < 4; ++p) t[p] = _mm512_dpbusd_epi32(z, x.v[p], load512(b.qs + 64 * p));
    sum =
        _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(z, _mm512_packs_epi32(t[0], t[1]), x.pair_scale[0]),
                            _mm512_packs_epi32(t[2], t[3]), x.pair_scale[1]);
    imin = _mm256_madd_epi16(x.mins, load256(b.bsums));
  }

  // [isum A, isum B, imin A, imin B] of two super-blocks in 128-bit lanes 0 and 2, from their
  // sums and min products, with one-uop shuffles (no phaddd: slow on Zen 5).
  static STRATA_INLINE __m512i halves(__m512i sum0, __m256i imin0, __m512i sum1, __m256i imin1) {
    // 128-bit lanes of the A (a) and B (b) parts: blocks 0, 0, 1, 1. Q4_K: A in lanes 0, 1 of a
    // sum; Q5_K: in lanes 0, 2.
    constexpr int kA = kFiveBit ? _MM_SHUFFLE(2, 0, 2, 0) : _MM_SHUFFLE(1, 0, 1, 0);
    constexpr int kB = kFiveBit ? _MM_SHUFFLE(3, 1, 3, 1) : _MM_SHUFFLE(3, 2, 3, 2);
    const __m512i a = _mm512_shuffle_i64x2(sum0, sum1, kA);
    const __m512i b = _mm512_shuffle_i64x2(sum0, sum1, kB);
    // Per 128-bit lane: [A, A, B, B] partial sums.
    const __m512 u = _mm512_castsi512_ps(
        _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b)));
    // Lanes: mins 0..3, 4..7 of block 0, then of block 1.
    const __m512 m =
        _mm512_castsi512_ps(_mm512_inserti64x4(_mm512_castsi256_si512(imin0), imin1, 1));
    // Per 128-bit lane: [A, B, imin 01 or 45, imin 23 or 67].
    const __m512i w =
        _mm512_add_epi32(_mm512_castps_si512(_mm512_shuffle_ps(u, m, _MM_SHUFFLE(2, 0, 2, 0))),
                         _mm512_castps_si512(_mm512_shuffle_ps(u, m, _MM_SHUFFLE(3, 1, 3, 1))));
    return _mm512_add_epi32(w, _mm512_shuffle_i64x2(w, w, _MM_SHUFFLE(2, 3, 0, 1)));
  }

  // One super-block into acc = [A, B, min A, min B]: f = [isum A, isum B, imin A, imin B] as
  // floats, xdm = [d, d, dmin, dmin] of the weights, da the activation scale (broadcast).
  static STRATA_INLINE void accumulate(__m128 f, __m128 xdm, __m128 da, __m128& acc) {
    acc = _mm_fmadd_ps(f, _mm_mul_ps(da, xdm), acc);
  }
  static STRATA_INLINE __m128 scales(const Block& b) {
    const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
    return _mm_setr_ps(d, d, dmin, dmin);
  }

  template <int N>
  static void run(int64_t n, const void* w, const uint8_t* act, int64_t stride, float* out) {
    const auto* x = static_cast<const Block*>(w);
    const Columns<BlockQ8_K, N> y(act, stride);
    // Q5_K: bit p of qh is the fifth bit of sub-block p; lower half sub-block 2p, upper 2p + 1.
    __m512i hsel[4];
    for (int p = 0; p < 4; ++p) {
      hsel[p] = _mm512_mask_blend_epi8(0xffffffff00000000ull,
                                       _mm512_set1_epi8(static_cast<char>(1 << (2 * p))),
                                       _mm512_set1_epi8(static_cast<char>(1 << (2 * p + 1))));
    }
    // Lanes: acc A, acc B, acc_m A, acc_m B.
    __m128 acc[N];
    for (int j = 0; j < N; ++j) acc[j] = _mm_setzero_ps();
    const int64_t nb = n / kQKK;
    int64_t i = 0;
    // Two super-blocks at a time share the horizontal sums; each still goes into acc on its own.
    for (; i + 1 < nb; i += 2) {
      const Decoded x0 = decode(x[i], hsel);
      const Decoded x1 = decode(x[i + 1], hsel);
      const __m128 xdm0 = scales(x[i]), xdm1 = scales(x[i + 1]);
      for (int j = 0; j < N; ++j) {
        __m512i sum0, sum1;
        __m256i imin0, imin1;
        sums(x0, y[j][i], sum0, imin0);
        sums(x1, y[j][i + 1], sum1, imin1);
        const __m512 f = _mm512_cvtepi32_ps(halves(sum0, imin0, sum1, imin1));
        accumulate(_mm512_castps512_ps128(f), xdm0, _mm_set1_ps(y[j][i].d), acc[j]);
        accumulate(_mm512_extractf32x4_ps(f, 2), xdm1, _mm_set1_ps(y[j][i + 1].d), acc[j]);
      }
    }
    if (i < nb) {
      const Decoded x0 = decode(x[i], hsel);
      const __m128 xdm0 = scales(x[i]);
      for (int j = 0; j < N; ++j) {
        __m512i sum0;
        __m256i imin0;
        sums(x0, y[j][i], sum0, imin0);
        const __m128i h = _mm512_castsi512_si128(
            halves(sum0, imin0, _mm512_setzero_si512(), _mm256_setzero_si256()));
        accumulate(_mm_cvtepi32_ps(h), xdm0, _mm_set1_ps(y[j][i].d), acc[j]);
      }
    }
    for (int j = 0; j < N; ++j) {
      const __m128 t = _mm_add_ps(acc[j], _mm_movehdup_ps(acc[j]));  // [A + B, -, mA + mB, -]
      out[j] = _mm_cvtss_f32(_mm_sub_ss(t, _mm_movehl_ps(t, t)));
    }
  }
};

// Q6_K in the float order of its tile GEMM (gemm_super_avx512.cpp, chains_avx512.h): 128-bit lane
// k of the integer sum collects groups k, 4 + k, 8 + k, 12 + k times their scales, starting from
// their offset corrections -32 * scale * sum(a) (words permuted to the same lanes); its 4 dwords
// are added and chain k takes acc = fma(isum_k, d_w * d_a, acc) in float lanes 4k..4k+3.
struct MultiQ6K {
  // Word 8k + i (i < 4) takes word k + 4i: the groups of lane k, paired in dwords.
  static constexpr __mmask32 kGroupWords = 0x0f0f0f0fu;
  static __m512i group_words() {
    return _mm512_set_epi16(0, 0, 0, 0, 15, 11, 7, 3, 0, 0, 0, 0, 14, 10, 6, 2, 0, 0, 0, 0, 13, 9,
                            5, 1, 0, 0, 0, 0, 12, 8, 4, 0);
  }

  template <int N>
  static void run(int64_t n, const void* w, const uint8_t* act, int64_t stride, float* out) {
    const auto* x = static_cast<const BlockQ6_K*>(w);
    const Columns<BlockQ8_K, N> y(act, stride);
    const __m512i words = group_words();
    __m512 acc[N];
    for (int j = 0; j < N; ++j) acc[j] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / kQKK; ++i) {
      const float xd = f16_to_f32(x[i].d);
      const __m256i sc16 = _mm256_cvtepi8_epi16(load128(x[i].scales));
      const __m512i neg32 = _mm512_maskz_permutexvar_epi16(
          kGroupWords, words,
          _mm512_zextsi256_si512(_mm256_mullo_epi16(sc16, _mm256_set1_epi16(-32))));
      Groups16 g;
      g.set_scales(sc16);
      Q6KCodes::codes(x[i], g.v);
      for (int j = 0; j < N; ++j) {
        const BlockQ8_K& b = y[j][i];
        const float d = b.d * xd;
        const __m512i bsums =
            _mm512_permutexvar_epi16(words, _mm512_zextsi256_si512(load256(b.bsums)));
        const __m512i init = _mm512_dpwssd_epi32(_mm512_setzero_si512(), neg32, bsums);
        const __m512i sum = g.template dot<N>(init, b.qs);
        acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lane_totals(sum)), _mm512_set1_ps(d), acc[j]);
      }
    }
    for (int j = 0; j < N; ++j) out[j] = finish_chains(acc[j]);
  }
};

#undef STRATA_INLINE

// ---------------------------------------------------------------------------------------------
// Q8_K activation quantizer: the element of largest magnitude maps to -127, round to nearest even,
// clamp at 127 through the saturating packs.

void quantize_q8k(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_K*>(dst);
  // Dword transpose of a 4x4 grid: undoes the lane-wise interleaving of the packs, and orders the
  // block sums.
  const __m512i transpose = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m512i ones8 = _mm512_set1_epi8(1);
  for (int64_t ib = 0; ib < n / kQKK; ++ib, src += kQKK) {
    BlockQ8_K& b = blocks[ib];
    __m512 mx0 = _mm512_loadu_ps(src), mx1 = _mm512_loadu_ps(src + 16);
    __m512 mn0 = mx0, mn1 = mx1;
    for (int k = 32; k < kQKK; k += 32) {
      const __m512 v0 = _mm512_loadu_ps(src + k), v1 = _mm512_loadu_ps(src + k + 16);
      mx0 = _mm512_max_ps(mx0, v0);
      mx1 = _mm512_max_ps(mx1, v1);
      mn0 = _mm512_min_ps(mn0, v0);
      mn1 = _mm512_min_ps(mn1, v1);
    }
    const float hi = _mm512_reduce_max_ps(_mm512_max_ps(mx0, mx1));
    const float lo = _mm512_reduce_min_ps(_mm512_min_ps(mn0, mn1));
    if (hi <= 0 && lo >= 0) {
      std::memset(&b, 0, sizeof b);
      continue;
    }
    const float vmax = hi >= -lo ? hi : lo;
    const float iscale = -127.0f / vmax;
    const __m512 mul = _mm512_set1_ps(iscale);
    __m512i t[4];
    for (int k = 0; k < 4; ++k) {
      const float* p = src + 64 * k;
      const __m512i i0 = _mm512_cvtps_epi32(_mm512_mul_ps(mul, _mm512_loadu_ps(p)));
      const __m512i i1 = _mm512_cvtps_epi32(_mm512_mul_ps(mul, _mm512_loadu_ps(p + 16)));
      const __m512i i2 = _mm512_cvtps_epi32(_mm512_mul_ps(mul, _mm512_loadu_ps(p + 32)));
      const __m512i i3 = _mm512_cvtps_epi32(_mm512_mul_ps(mul, _mm512_loadu_ps(p + 48)));
      const __m512i packed =
          _mm512_packs_epi16(_mm512_packs_epi32(i0, i1), _mm512_packs_epi32(i2, i3));
      const __m512i q = _mm512_permutexvar_epi32(transpose, packed);
      _mm512_storeu_si512(b.qs + 64 * k, q);
      // Lane L of q is group 4k + L; four partial sums of 4 per lane.
      t[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones8, q);
    }
    // Reduce the four partials per lane: lane L, dword k of r = sum of group 4k + L.
    const __m512i s01 =
        _mm512_add_epi32(_mm512_unpacklo_epi32(t[0], t[1]), _mm512_unpackhi_epi32(t[0], t[1]));
    const __m512i s23 =
        _mm512_add_epi32(_mm512_unpacklo_epi32(t[2], t[3]), _mm512_unpackhi_epi32(t[2], t[3]));
    const __m512i r =
        _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
    const __m512i sums = _mm512_permutexvar_epi32(transpose, r);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b.bsums), _mm512_cvtepi32_epi16(sums));
    b.d = 1.0f / iscale;
  }
}

}  // namespace

void fill_kquants_avx512(KernelTable& table) {
  table[GgmlType::Q2_K].vec_dot = vec_dot_of<MultiQ2K>;
  table[GgmlType::Q3_K].vec_dot = vec_dot_of<MultiQ3K>;
  table[GgmlType::Q4_K].vec_dot = vec_dot_of<MultiK4Like<false>>;
  table[GgmlType::Q5_K].vec_dot = vec_dot_of<MultiK4Like<true>>;
  table[GgmlType::Q6_K].vec_dot = vec_dot_of<MultiQ6K>;
  table[GgmlType::Q2_K].vec_dot_multi = vec_dot_multi_of<MultiQ2K>;
  table[GgmlType::Q3_K].vec_dot_multi = vec_dot_multi_of<MultiQ3K>;
  table[GgmlType::Q4_K].vec_dot_multi = vec_dot_multi_of<MultiK4Like<false>, 4>;
  table[GgmlType::Q5_K].vec_dot_multi = vec_dot_multi_of<MultiK4Like<true>, 4>;
  table[GgmlType::Q6_K].vec_dot_multi = vec_dot_multi_of<MultiQ6K>;
  table[GgmlType::Q8_K].quantize_row = quantize_q8k;
}

}  // namespace strata::quant
