// AVX2 + FMA kernels of the K-quants: dot products with Q8_K activations (unsigned weight quants
// times signed activations with _mm256_maddubs_epi16, sub-block scales applied with
// _mm256_madd_epi16, mins and offsets folded in through the activation block sums), the Q8_K
// activation quantizer, and dequantization of every K-quant and Q8_K.
//
// Integer sums stay exact inside a super-block; each super-block adds one float FMA per
// accumulator, and horizontal sums happen once per row.

#include <immintrin.h>

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "quant/avx2_common.h"
#include "quant/kernel_table.h"
#include "quant/kquants_common.h"
#include "quant/multi_dot.h"

namespace strata::quant {
namespace {

// Byte-shuffle masks over a vector whose two 128-bit lanes hold the same eight int16 values:
//   kSame[j]: every int16 of both lanes becomes value j;
//   kPair[k]: the low lane becomes value 2k, the high lane value 2k + 1 (one scale per 16
//             elements, as the 16 int16 products of a 32-element maddubs come out).
struct Masks {
  alignas(32) uint8_t same[8][32];
  alignas(32) uint8_t pair[4][32];
};
constexpr Masks make_masks() {
  Masks m{};
  for (int j = 0; j < 8; ++j) {
    for (int b = 0; b < 32; ++b) m.same[j][b] = static_cast<uint8_t>(2 * j + b % 2);
  }
  for (int k = 0; k < 4; ++k) {
    for (int b = 0; b < 32; ++b) m.pair[k][b] = static_cast<uint8_t>(2 * (2 * k + b / 16) + b % 2);
  }
  return m;
}
constexpr Masks kMasks = make_masks();

inline __m256i mask_same(int j) {
  return load256(kMasks.same[j]);
}
inline __m256i mask_pair(int k) {
  return load256(kMasks.pair[k]);
}

// Eight int16 in both lanes of a 256-bit vector.
inline __m256i both_lanes(__m128i v) {
  return _mm256_broadcastsi128_si256(v);
}

// ---------------------------------------------------------------------------------------------
// Dot products.

float vec_dot_q2k(int64_t n, const void* w, const void* act) {
  const auto* x = static_cast<const BlockQ2_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(act);
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m128i m4 = _mm_set1_epi8(0x0f);
  __m256 acc = _mm256_setzero_ps(), acc_m = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float d = y[i].d * f16_to_f32(x[i].d);
    const float dmin = y[i].d * f16_to_f32(x[i].dmin);
    const __m128i sm = load128(x[i].scales);
    const __m128i sc8 = _mm_and_si128(sm, m4);
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), m4));
    const __m256i prod_m = _mm256_madd_epi16(mins, load256(y[i].bsums));
    acc_m = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(prod_m), acc_m);
    const __m256i sc_half[2] = {both_lanes(_mm_cvtepu8_epi16(sc8)),
                                both_lanes(_mm_cvtepu8_epi16(_mm_srli_si128(sc8, 8)))};
    const int8_t* a = y[i].qs;
    __m256i sum0 = _mm256_setzero_si256(), sum1 = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load256(x[i].qs + 32 * h);
      const __m256i v0 = _mm256_and_si256(q, m3);
      const __m256i v1 = _mm256_and_si256(_mm256_srli_epi16(q, 2), m3);
      const __m256i v2 = _mm256_and_si256(_mm256_srli_epi16(q, 4), m3);
      const __m256i v3 = _mm256_and_si256(_mm256_srli_epi16(q, 6), m3);
      const __m256i p0 = _mm256_maddubs_epi16(v0, load256(a + 128 * h));
      const __m256i p1 = _mm256_maddubs_epi16(v1, load256(a + 128 * h + 32));
      const __m256i p2 = _mm256_maddubs_epi16(v2, load256(a + 128 * h + 64));
      const __m256i p3 = _mm256_maddubs_epi16(v3, load256(a + 128 * h + 96));
      const __m256i s = sc_half[h];
      sum0 = _mm256_add_epi32(sum0, _mm256_madd_epi16(p0, _mm256_shuffle_epi8(s, mask_pair(0))));
      sum1 = _mm256_add_epi32(sum1, _mm256_madd_epi16(p1, _mm256_shuffle_epi8(s, mask_pair(1))));
      sum0 = _mm256_add_epi32(sum0, _mm256_madd_epi16(p2, _mm256_shuffle_epi8(s, mask_pair(2))));
      sum1 = _mm256_add_epi32(sum1, _mm256_madd_epi16(p3, _mm256_shuffle_epi8(s, mask_pair(3))));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_add_epi32(sum0, sum1)), acc);
  }
  return hsum(acc) - hsum(acc_m);
}

float vec_dot_q3k(int64_t n, const void* w, const void* act) {
  const auto* x = static_cast<const BlockQ3_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(act);
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m256i m4 = _mm256_set1_epi8(4);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float d = y[i].d * f16_to_f32(x[i].d);
    uint32_t sw[4];
    unpack_q3k_scales_words(x[i].scales, sw);
    const __m128i sc8 =
        _mm_sub_epi8(_mm_set_epi32(static_cast<int>(sw[3]), static_cast<int>(sw[2]),
                                   static_cast<int>(sw[1]), static_cast<int>(sw[0])),
                     _mm_set1_epi8(32));
    const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
    // q = v - 4 with v = low | high << 2 in 0..7: subtract 4 * scale * (block sum) at the end.
    const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(sc16, load256(y[i].bsums)), 2);
    const __m256i sc_half[2] = {both_lanes(_mm256_castsi256_si128(sc16)),
                                both_lanes(_mm256_extracti128_si256(sc16, 1))};
    const __m256i hm = load256(x[i].hmask);
    const int8_t* a = y[i].qs;
    __m256i sum0 = _mm256_setzero_si256(), sum1 = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load256(x[i].qs + 32 * h);
      // High bit of field j of half h is bit 4h + j of hmask; move it to bit 2.
      const __m256i hb = h == 0 ? hm : _mm256_srli_epi16(hm, 4);
      const __m256i v0 =
          _mm256_or_si256(_mm256_and_si256(q, m3), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m4));
      const __m256i v1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2), m3),
                                         _mm256_and_si256(_mm256_slli_epi16(hb, 1), m4));
      const __m256i v2 =
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m3), _mm256_and_si256(hb, m4));
      const __m256i v3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 6), m3),
                                         _mm256_and_si256(_mm256_srli_epi16(hb, 1), m4));
      const __m256i p0 = _mm256_maddubs_epi16(v0, load256(a + 128 * h));
      const __m256i p1 = _mm256_maddubs_epi16(v1, load256(a + 128 * h + 32));
      const __m256i p2 = _mm256_maddubs_epi16(v2, load256(a + 128 * h + 64));
      const __m256i p3 = _mm256_maddubs_epi16(v3, load256(a + 128 * h + 96));
      const __m256i s = sc_half[h];
      sum0 = _mm256_add_epi32(sum0, _mm256_madd_epi16(p0, _mm256_shuffle_epi8(s, mask_pair(0))));
      sum1 = _mm256_add_epi32(sum1, _mm256_madd_epi16(p1, _mm256_shuffle_epi8(s, mask_pair(1))));
      sum0 = _mm256_add_epi32(sum0, _mm256_madd_epi16(p2, _mm256_shuffle_epi8(s, mask_pair(2))));
      sum1 = _mm256_add_epi32(sum1, _mm256_madd_epi16(p3, _mm256_shuffle_epi8(s, mask_pair(3))));
    }
    const __m256i sumi = _mm256_sub_epi32(_mm256_add_epi32(sum0, sum1), offset);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum(acc);
}

// Q4_K and Q5_K share everything but the fifth bit.
template <bool kFiveBit>
float vec_dot_k4_like(int64_t n, const void* w, const void* act) {
  using Block = std::conditional_t<kFiveBit, BlockQ5_K, BlockQ4_K>;
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(act);
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i bit4 = _mm256_set1_epi8(0x10);
  __m256 acc = _mm256_setzero_ps(), acc_m = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    static_assert(offsetof(Block, dmin) == offsetof(Block, d) + 2);
    const __m128 dd = _mm_mul_ps(_mm_set1_ps(y[i].d), load_f16_pair(&x[i].d));  // d, dmin
    const __m128i sm = unpack_k4_scales_vec(x[i].scales);  // bytes: scales 0..7, mins 0..7
    // mins m0 m0 m1 m1 .. m7 m7 (int16) against the 16 block sums.
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));
    const __m256i prod_m = _mm256_madd_epi16(mins, load256(y[i].bsums));
    acc_m = _mm256_fmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(dd)), _mm256_cvtepi32_ps(prod_m),
                            acc_m);
    const __m256i sc = both_lanes(_mm_cvtepu8_epi16(sm));

    const int8_t* a = y[i].qs;
    __m256i hbits;
    if constexpr (kFiveBit) hbits = load256(x[i].qh);
    __m256i sum0 = _mm256_setzero_si256(), sum1 = _mm256_setzero_si256();
    for (int p = 0; p < 4; ++p) {
      const __m256i q = load256(x[i].qs + 32 * p);
      __m256i lo = _mm256_and_si256(q, m4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      if constexpr (kFiveBit) {
        // Bits 2p and 2p + 1 of qh (now at bits 0 and 1) are the fifth bits of sub-blocks 2p, 2p+1.
        lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(hbits, 4), bit4));
        hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(hbits, 3), bit4));
        hbits = _mm256_srli_epi16(hbits, 2);
      }
      const __m256i plo = _mm256_maddubs_epi16(lo, load256(a + 64 * p));
      const __m256i phi = _mm256_maddubs_epi16(hi, load256(a + 64 * p + 32));
      sum0 =
          _mm256_add_epi32(sum0, _mm256_madd_epi16(plo, _mm256_shuffle_epi8(sc, mask_same(2 * p))));
      sum1 = _mm256_add_epi32(
          sum1, _mm256_madd_epi16(phi, _mm256_shuffle_epi8(sc, mask_same(2 * p + 1))));
    }
    acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(dd),
                          _mm256_cvtepi32_ps(_mm256_add_epi32(sum0, sum1)), acc);
  }
  return hsum(acc) - hsum(acc_m);
}

float vec_dot_q6k(int64_t n, const void* w, const void* act) {
  const auto* x = static_cast<const BlockQ6_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(act);
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i m30 = _mm256_set1_epi8(0x30);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float d = y[i].d * f16_to_f32(x[i].d);
    const __m256i sc16 = _mm256_cvtepi8_epi16(load128(x[i].scales));
    // q = v - 32 with v = 0..63: subtract 32 * scale * (block sum) at the end.
    const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(sc16, load256(y[i].bsums)), 5);
    const __m256i sc_half[2] = {both_lanes(_mm256_castsi256_si128(sc16)),
                                both_lanes(_mm256_extracti128_si256(sc16, 1))};
    const int8_t* a = y[i].qs;
    __m256i sum0 = _mm256_setzero_si256(), sum1 = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i l0 = load256(x[i].ql + 64 * h);
      const __m256i l1 = load256(x[i].ql + 64 * h + 32);
      const __m256i qh = load256(x[i].qh + 32 * h);
      const __m256i v0 = _mm256_or_si256(_mm256_and_si256(l0, m4),
                                         _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
      const __m256i v1 = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                         _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
      const __m256i v2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                         _mm256_and_si256(qh, m30));
      const __m256i v3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                         _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
      const __m256i p0 = _mm256_maddubs_epi16(v0, load256(a + 128 * h));
      const __m256i p1 = _mm256_maddubs_epi16(v1, load256(a + 128 * h + 32));
      const __m256i p2 = _mm256_maddubs_epi16(v2, load256(a + 128 * h + 64));
      const __m256i p3 = _mm256_maddubs_epi16(v3, load256(a + 128 * h + 96));
      const __m256i s = sc_half[h];
      sum0 = _mm256_add_epi32(sum0, _mm256_madd_epi16(p0, _mm256_shuffle_epi8(s, mask_pair(0))));
      sum1 = _mm256_add_epi32(sum1, _mm256_madd_epi16(p1, _mm256_shuffle_epi8(s, mask_pair(1))));
      sum0 = _mm256_add_epi32(sum0, _mm256_madd_epi16(p2, _mm256_shuffle_epi8(s, mask_pair(2))));
      sum1 = _mm256_add_epi32(sum1, _mm256_madd_epi16(p3, _mm256_shuffle_epi8(s, mask_pair(3))));
    }
    const __m256i sumi = _mm256_sub_epi32(_mm256_add_epi32(sum0, sum1), offset);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum(acc);
}

// ---------------------------------------------------------------------------------------------
// Multi-row dot products (vec_dot_multi): each 32-byte chunk of a weight super-block is unpacked
// once (with its scales), then multiplied with the N activation rows into one int32 sum per row;
// the rows' float steps follow once per super-block. With 16 registers, unpacking a whole
// super-block ahead of the rows would spill. Per row the integer sums equal vec_dot's (exact, in
// another order) and the float operations are the same in the same order: bit-identical results.

// Per-row int32 sums of one super-block: add(v, s, offset) adds madd(maddubs(v, a), s) for the 32
// activations at `offset` of every row's block i.
template <int N>
struct RowSums {
  __m256i sum[N];
  const int8_t* a[N];
  RowSums(const Columns<BlockQ8_K, N>& y, int64_t i) {
    for (int j = 0; j < N; ++j) {
      sum[j] = _mm256_setzero_si256();
      a[j] = y[j][i].qs;
    }
  }
  void add(__m256i v, __m256i s, int offset) {
    for (int j = 0; j < N; ++j) {
      sum[j] = _mm256_add_epi32(
          sum[j], _mm256_madd_epi16(_mm256_maddubs_epi16(v, load256(a[j] + offset)), s));
    }
  }
};

// Scales of 16 groups of 16 (int16 in sc16) for the quants at 128h + 32k .. +31: low lane group
// 8h + 2k, high lane 8h + 2k + 1.
inline __m256i group16_scale(__m256i sc16, int h, int k) {
  const __m256i half =
      both_lanes(h == 0 ? _mm256_castsi256_si128(sc16) : _mm256_extracti128_si256(sc16, 1));
  return _mm256_shuffle_epi8(half, mask_pair(k));
}

struct MultiQ2K {
  template <int N>
  static void run(int64_t n, const void* w, const uint8_t* act, int64_t stride, float* out) {
    const auto* x = static_cast<const BlockQ2_K*>(w);
    const Columns<BlockQ8_K, N> y(act, stride);
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m128i m4 = _mm_set1_epi8(0x0f);
    __m256 acc[N], acc_m[N];
    for (int j = 0; j < N; ++j) acc[j] = acc_m[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / kQKK; ++i) {
      const float xd = f16_to_f32(x[i].d), xmin = f16_to_f32(x[i].dmin);
      const __m128i sm = load128(x[i].scales);
      const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), m4));
      const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sm, m4));
      for (int j = 0; j < N; ++j) {
        const BlockQ8_K& b = y[j][i];
        const float dmin = b.d * xmin;
        const __m256i prod_m = _mm256_madd_epi16(mins, load256(b.bsums));
        acc_m[j] = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(prod_m), acc_m[j]);
      }
      RowSums<N> sums(y, i);
      for (int h = 0; h < 2; ++h) {
        const __m256i q = load256(x[i].qs + 32 * h);
        for (int k = 0; k < 4; ++k) {
          sums.add(_mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m3), group16_scale(sc16, h, k),
                   128 * h + 32 * k);
        }
      }
      for (int j = 0; j < N; ++j) {
        const float d = y[j][i].d * xd;
        acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sums.sum[j]), acc[j]);
      }
    }
    for (int j = 0; j < N; ++j) out[j] = hsum(acc[j]) - hsum(acc_m[j]);
  }
};

struct MultiQ3K {
  template <int N>
  static void run(int64_t n, const void* w, const uint8_t* act, int64_t stride, float* out) {
    const auto* x = static_cast<const BlockQ3_K*>(w);
    const Columns<BlockQ8_K, N> y(act, stride);
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m256i m4 = _mm256_set1_epi8(4);
    __m256 acc[N];
    for (int j = 0; j < N; ++j) acc[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / kQKK; ++i) {
      const float xd = f16_to_f32(x[i].d);
      uint32_t sw[4];
      unpack_q3k_scales_words(x[i].scales, sw);
      const __m128i sc8 =
          _mm_sub_epi8(_mm_set_epi32(static_cast<int>(sw[3]), static_cast<int>(sw[2]),
                                     static_cast<int>(sw[1]), static_cast<int>(sw[0])),
                       _mm_set1_epi8(32));
      const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
      RowSums<N> sums(y, i);
      const __m256i hm = load256(x[i].hmask);
      for (int h = 0; h < 2; ++h) {
        const __m256i q = load256(x[i].qs + 32 * h);
        // High bit of field k of half h is bit 4h + k of hmask; move it to bit 2.
        const __m256i hb = h == 0 ? hm : _mm256_srli_epi16(hm, 4);
        const __m256i v[4] = {_mm256_or_si256(_mm256_and_si256(q, m3),
                                              _mm256_and_si256(_mm256_slli_epi16(hb, 2), m4)),
                              _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2), m3),
                                              _mm256_and_si256(_mm256_slli_epi16(hb, 1), m4)),
                              _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m3),
                                              _mm256_and_si256(hb, m4)),
                              _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 6), m3),
                                              _mm256_and_si256(_mm256_srli_epi16(hb, 1), m4))};
        for (int k = 0; k < 4; ++k) sums.add(v[k], group16_scale(sc16, h, k), 128 * h + 32 * k);
      }
      for (int j = 0; j < N; ++j) {
        const BlockQ8_K& b = y[j][i];
        const float d = b.d * xd;
        // q = v - 4 with v = low | high << 2 in 0..7: subtract 4 * scale * (block sum).
        const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(sc16, load256(b.bsums)), 2);
        const __m256i sumi = _mm256_sub_epi32(sums.sum[j], offset);
        acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc[j]);
      }
    }
    for (int j = 0; j < N; ++j) out[j] = hsum(acc[j]);
  }
};

template <bool kFiveBit>
struct MultiK4Like {
  template <int N>
  static void run(int64_t n, const void* w, const uint8_t* act, int64_t stride, float* out) {
    using Block = std::conditional_t<kFiveBit, BlockQ5_K, BlockQ4_K>;
    const auto* x = static_cast<const Block*>(w);
    const Columns<BlockQ8_K, N> y(act, stride);
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i bit4 = _mm256_set1_epi8(0x10);
    __m256 acc[N], acc_m[N];
    for (int j = 0; j < N; ++j) acc[j] = acc_m[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / kQKK; ++i) {
      static_assert(offsetof(Block, dmin) == offsetof(Block, d) + 2);
      const __m128 dw = load_f16_pair(&x[i].d);              // d, dmin
      const __m128i sm = unpack_k4_scales_vec(x[i].scales);  // bytes: scales 0..7, mins 0..7
      // mins m0 m0 m1 m1 .. m7 m7 (int16) against the 16 block sums.
      const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));
      for (int j = 0; j < N; ++j) {
        const BlockQ8_K& b = y[j][i];
        const __m128 dd = _mm_mul_ps(_mm_set1_ps(b.d), dw);
        const __m256i prod_m = _mm256_madd_epi16(mins, load256(b.bsums));
        acc_m[j] = _mm256_fmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(dd)),
                                   _mm256_cvtepi32_ps(prod_m), acc_m[j]);
      }
      const __m256i sc = both_lanes(_mm_cvtepu8_epi16(sm));
      __m256i hbits;
      if constexpr (kFiveBit) hbits = load256(x[i].qh);
      RowSums<N> sums(y, i);
      for (int p = 0; p < 4; ++p) {
        const __m256i q = load256(x[i].qs + 32 * p);
        __m256i lo = _mm256_and_si256(q, m4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        if constexpr (kFiveBit) {
          // Bits 2p and 2p + 1 of qh (now at bits 0 and 1): fifth bits of sub-blocks 2p, 2p+1.
          lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(hbits, 4), bit4));
          hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(hbits, 3), bit4));
          hbits = _mm256_srli_epi16(hbits, 2);
        }
        sums.add(lo, _mm256_shuffle_epi8(sc, mask_same(2 * p)), 64 * p);
        sums.add(hi, _mm256_shuffle_epi8(sc, mask_same(2 * p + 1)), 64 * p + 32);
      }
      for (int j = 0; j < N; ++j) {
        const __m128 dd = _mm_mul_ps(_mm_set1_ps(y[j][i].d), dw);
        acc[j] =
            _mm256_fmadd_ps(_mm256_broadcastss_ps(dd), _mm256_cvtepi32_ps(sums.sum[j]), acc[j]);
      }
    }
    for (int j = 0; j < N; ++j) out[j] = hsum(acc[j]) - hsum(acc_m[j]);
  }
};

struct MultiQ6K {
  template <int N>
  static void run(int64_t n, const void* w, const uint8_t* act, int64_t stride, float* out) {
    const auto* x = static_cast<const BlockQ6_K*>(w);
    const Columns<BlockQ8_K, N> y(act, stride);
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i m30 = _mm256_set1_epi8(0x30);
    __m256 acc[N];
    for (int j = 0; j < N; ++j) acc[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / kQKK; ++i) {
      const float xd = f16_to_f32(x[i].d);
      const __m256i sc16 = _mm256_cvtepi8_epi16(load128(x[i].scales));
      RowSums<N> sums(y, i);
      for (int h = 0; h < 2; ++h) {
        const __m256i l0 = load256(x[i].ql + 64 * h);
        const __m256i l1 = load256(x[i].ql + 64 * h + 32);
        const __m256i qh = load256(x[i].qh + 32 * h);
        const int base = 128 * h;
        sums.add(_mm256_or_si256(_mm256_and_si256(l0, m4),
                                 _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)),
                 group16_scale(sc16, h, 0), base);
        sums.add(_mm256_or_si256(_mm256_and_si256(l1, m4),
                                 _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)),
                 group16_scale(sc16, h, 1), base + 32);
        sums.add(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                 _mm256_and_si256(qh, m30)),
                 group16_scale(sc16, h, 2), base + 64);
        sums.add(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                 _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30)),
                 group16_scale(sc16, h, 3), base + 96);
      }
      for (int j = 0; j < N; ++j) {
        const BlockQ8_K& b = y[j][i];
        const float d = b.d * xd;
        // q = v - 32 with v = 0..63: subtract 32 * scale * (block sum).
        const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(sc16, load256(b.bsums)), 5);
        const __m256i sumi = _mm256_sub_epi32(sums.sum[j], offset);
        acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc[j]);
      }
    }
    for (int j = 0; j < N; ++j) out[j] = hsum(acc[j]);
  }
};

// ---------------------------------------------------------------------------------------------
// Q8_K activation quantizer: same convention as the reference (the element of largest magnitude
// maps to -127, round to nearest even, clamp at 127 by the saturating packs).

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}
inline float hmin(__m256 v) {
  __m128 m = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_min_ps(m, _mm_movehl_ps(m, m));
  m = _mm_min_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

void quantize_q8k(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_K*>(dst);
  const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i ones8 = _mm256_set1_epi8(1);
  const __m256i ones16 = _mm256_set1_epi16(1);
  for (int64_t ib = 0; ib < n / kQKK; ++ib, src += kQKK) {
    BlockQ8_K& b = blocks[ib];
    __m256 mx0 = _mm256_loadu_ps(src), mx1 = _mm256_loadu_ps(src + 8);
    __m256 mn0 = mx0, mn1 = mx1;
    for (int k = 16; k < kQKK; k += 16) {
      const __m256 v0 = _mm256_loadu_ps(src + k), v1 = _mm256_loadu_ps(src + k + 8);
      mx0 = _mm256_max_ps(mx0, v0);
      mx1 = _mm256_max_ps(mx1, v1);
      mn0 = _mm256_min_ps(mn0, v0);
      mn1 = _mm256_min_ps(mn1, v1);
    }
    const float hi = hmax(_mm256_max_ps(mx0, mx1)), lo = hmin(_mm256_min_ps(mn0, mn1));
    if (hi <= 0 && lo >= 0) {
      std::memset(&b, 0, sizeof b);
      continue;
    }
    const float vmax = hi >= -lo ? hi : lo;
    const float iscale = -127.0f / vmax;
    const __m256 mul = _mm256_set1_ps(iscale);
    __m256i q8[8];
    for (int k = 0; k < 8; ++k) {
      const float* p = src + 32 * k;
      const __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(mul, _mm256_loadu_ps(p)));
      const __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(mul, _mm256_loadu_ps(p + 8)));
      const __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(mul, _mm256_loadu_ps(p + 16)));
      const __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(mul, _mm256_loadu_ps(p + 24)));
      // packs work per 128-bit lane: fix the dword order afterwards.
      const __m256i p16 =
          _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
      q8[k] = _mm256_permutevar8x32_epi32(p16, perm);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(b.qs + 32 * k), q8[k]);
    }
    // Block sums of 16: sums of 4 per int32 (lanes 0-3 first group, 4-7 second), then two rounds
    // of hadd give [g0 g2 g4 g6 | g1 g3 g5 g7] per vector of four inputs.
    __m256i s4[8];
    for (int k = 0; k < 8; ++k)
      s4[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q8[k]), ones16);
    const __m256i y0 =
        _mm256_hadd_epi32(_mm256_hadd_epi32(s4[0], s4[1]), _mm256_hadd_epi32(s4[2], s4[3]));
    const __m256i y1 =
        _mm256_hadd_epi32(_mm256_hadd_epi32(s4[4], s4[5]), _mm256_hadd_epi32(s4[6], s4[7]));
    const __m256i packed = _mm256_packs_epi32(y0, y1);  // [even groups | odd groups] as int16
    const __m128i even = _mm256_castsi256_si128(packed), odd = _mm256_extracti128_si256(packed, 1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(b.bsums), _mm_unpacklo_epi16(even, odd));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(b.bsums + 8), _mm_unpackhi_epi16(even, odd));
    b.d = 1.0f / iscale;
  }
}

// ---------------------------------------------------------------------------------------------
// Dequantization. Same arithmetic as the reference: (d * scale) * q - (dmin * min).

inline __m256 bytes_to_ps(__m128i eight_bytes_low_u8) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(eight_bytes_low_u8));
}

// 32 unsigned quants (one per byte) -> dst[0..31] = ds * q - dm.
inline void store_affine32(__m256i q, float ds, float dm, float* dst) {
  const __m256 vd = _mm256_set1_ps(ds), vm = _mm256_set1_ps(dm);
  const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
  const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
  for (int k = 0; k < 4; ++k) {
    _mm256_storeu_ps(dst + 8 * k, _mm256_sub_ps(_mm256_mul_ps(vd, bytes_to_ps(parts[k])), vm));
  }
}

// 16 small quants (one per byte, -128..127) -> dst[0..15] = ds * q - dm.
inline void store_affine16(__m128i q, float ds, float dm, float* dst) {
  const __m256 vd = _mm256_set1_ps(ds), vm = _mm256_set1_ps(dm);
  const __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
  const __m256 hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8)));
  _mm256_storeu_ps(dst, _mm256_sub_ps(_mm256_mul_ps(vd, lo), vm));
  _mm256_storeu_ps(dst + 8, _mm256_sub_ps(_mm256_mul_ps(vd, hi), vm));
}

void dequantize_q2k(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ2_K*>(src);
  const __m256i m3 = _mm256_set1_epi8(3);
  for (int64_t i = 0; i < n / kQKK; ++i, dst += kQKK) {
    const float d = f16_to_f32(x[i].d), dmin = f16_to_f32(x[i].dmin);
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load256(x[i].qs + 32 * h);
      for (int j = 0; j < 4; ++j) {
        const __m256i v = _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * j)), m3);
        for (int g = 0; g < 2; ++g) {
          const int sub = 8 * h + 2 * j + g;
          const int sm = x[i].scales[sub];
          store_affine16(g == 0 ? _mm256_castsi256_si128(v) : _mm256_extracti128_si256(v, 1),
                         d * static_cast<float>(sm & 15), dmin * static_cast<float>(sm >> 4),
                         dst + 16 * sub);
        }
      }
    }
  }
}

void dequantize_q3k(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ3_K*>(src);
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m256i m4 = _mm256_set1_epi8(4);
  for (int64_t i = 0; i < n / kQKK; ++i, dst += kQKK) {
    const float d = f16_to_f32(x[i].d);
    int8_t scales[16];
    unpack_q3k_scales(x[i].scales, scales);
    const __m256i hm = load256(x[i].hmask);
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load256(x[i].qs + 32 * h);
      for (int j = 0; j < 4; ++j) {
        // low 2 bits at shift 2j; high bit 4h + j of hmask moved to bit 2; q = v - 4.
        const __m256i low = _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * j)), m3);
        const int k = 4 * h + j;
        const __m256i high =
            _mm256_and_si256(k >= 2 ? _mm256_srl_epi16(hm, _mm_cvtsi32_si128(k - 2))
                                    : _mm256_sll_epi16(hm, _mm_cvtsi32_si128(2 - k)),
                             m4);
        const __m256i v = _mm256_sub_epi8(_mm256_or_si256(low, high), m4);
        for (int g = 0; g < 2; ++g) {
          const int sub = 8 * h + 2 * j + g;
          store_affine16(g == 0 ? _mm256_castsi256_si128(v) : _mm256_extracti128_si256(v, 1),
                         d * static_cast<float>(scales[sub]), 0.0f, dst + 16 * sub);
        }
      }
    }
  }
}

template <bool kFiveBit>
void dequantize_k4_like(const void* src, float* dst, int64_t n) {
  using Block = std::conditional_t<kFiveBit, BlockQ5_K, BlockQ4_K>;
  const auto* x = static_cast<const Block*>(src);
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i bit4 = _mm256_set1_epi8(0x10);
  for (int64_t i = 0; i < n / kQKK; ++i, dst += kQKK) {
    const float d = f16_to_f32(x[i].d), dmin = f16_to_f32(x[i].dmin);
    uint8_t sc[8], mn[8];
    unpack_k4_scales(x[i].scales, sc, mn);
    __m256i hbits;
    if constexpr (kFiveBit) hbits = load256(x[i].qh);
    for (int p = 0; p < 4; ++p) {
      const __m256i q = load256(x[i].qs + 32 * p);
      __m256i lo = _mm256_and_si256(q, m4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      if constexpr (kFiveBit) {
        lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(hbits, 4), bit4));
        hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(hbits, 3), bit4));
        hbits = _mm256_srli_epi16(hbits, 2);
      }
      const int j = 2 * p;
      store_affine32(lo, d * static_cast<float>(sc[j]), dmin * static_cast<float>(mn[j]),
                     dst + 32 * j);
      store_affine32(hi, d * static_cast<float>(sc[j + 1]), dmin * static_cast<float>(mn[j + 1]),
                     dst + 32 * j + 32);
    }
  }
}

void dequantize_q6k(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ6_K*>(src);
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i m30 = _mm256_set1_epi8(0x30);
  const __m256i m32 = _mm256_set1_epi8(32);
  for (int64_t i = 0; i < n / kQKK; ++i, dst += kQKK) {
    const float d = f16_to_f32(x[i].d);
    for (int h = 0; h < 2; ++h) {
      const __m256i l0 = load256(x[i].ql + 64 * h);
      const __m256i l1 = load256(x[i].ql + 64 * h + 32);
      const __m256i qh = load256(x[i].qh + 32 * h);
      const __m256i v[4] = {_mm256_or_si256(_mm256_and_si256(l0, m4),
                                            _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)),
                            _mm256_or_si256(_mm256_and_si256(l1, m4),
                                            _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)),
                            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                            _mm256_and_si256(qh, m30)),
                            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                            _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30))};
      for (int k = 0; k < 4; ++k) {
        const __m256i q = _mm256_sub_epi8(v[k], m32);  // -32..31
        float* out = dst + 128 * h + 32 * k;
        for (int g = 0; g < 2; ++g) {
          const __m256 ds = _mm256_set1_ps(d * static_cast<float>(x[i].scales[8 * h + 2 * k + g]));
          const __m128i q16 = g == 0 ? _mm256_castsi256_si128(q) : _mm256_extracti128_si256(q, 1);
          _mm256_storeu_ps(out + 16 * g,
                           _mm256_mul_ps(ds, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q16))));
          _mm256_storeu_ps(
              out + 16 * g + 8,
              _mm256_mul_ps(ds, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q16, 8)))));
        }
      }
    }
  }
}

void dequantize_q8k(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ8_K*>(src);
  for (int64_t i = 0; i < n / kQKK; ++i, dst += kQKK) {
    const __m256 d = _mm256_set1_ps(x[i].d);
    for (int k = 0; k < kQKK; k += 16) {
      const __m128i q = load128(x[i].qs + k);
      _mm256_storeu_ps(dst + k, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
      _mm256_storeu_ps(
          dst + k + 8,
          _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8)))));
    }
  }
}

}  // namespace

void fill_kquants_avx2(KernelTable& table) {
  table[GgmlType::Q2_K] = {dequantize_q2k, nullptr, vec_dot_q2k, vec_dot_multi_of<MultiQ2K>};
  table[GgmlType::Q3_K] = {dequantize_q3k, nullptr, vec_dot_q3k, vec_dot_multi_of<MultiQ3K>};
  table[GgmlType::Q4_K] = {dequantize_k4_like<false>, nullptr, vec_dot_k4_like<false>,
                           vec_dot_multi_of<MultiK4Like<false>>};
  table[GgmlType::Q5_K] = {dequantize_k4_like<true>, nullptr, vec_dot_k4_like<true>,
                           vec_dot_multi_of<MultiK4Like<true>>};
  table[GgmlType::Q6_K] = {dequantize_q6k, nullptr, vec_dot_q6k, vec_dot_multi_of<MultiQ6K>};
  table[GgmlType::Q8_K] = {dequantize_q8k, quantize_q8k, nullptr};
}

}  // namespace strata::quant
