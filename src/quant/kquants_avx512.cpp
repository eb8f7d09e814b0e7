// AVX-512 (F/BW/VL/DQ + VNNI) kernels of the K-quants: dot products with Q8_K activations on
// 512-bit vectors, 64 elements at a time. Weight quants (unsigned) times activations (signed)
// with _mm512_maddubs_epi16; the 16-bit pair sums never saturate for these formats (at most
// 2 * 63 * 128), and _mm512_dpwssd_epi32 multiplies them by the sub-block scales and accumulates in
// int32 in one instruction. Mins and offsets come in through the activation block sums. Also the
// Q8_K activation quantizer. Dequantization falls back to the AVX2 kernels.

#include <immintrin.h>

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "quant/kernel_table.h"
#include "quant/kquants_common.h"

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
//   halves[p]: lanes 0-1 become value 2p, lanes 2-3 value 2p + 1 (one scale per 32 elements);
//   lanes_lo / lanes_hi: lane L becomes value L / value 4 + L (one scale per 16 elements).
struct Masks {
  alignas(64) uint8_t halves[4][64];
  alignas(64) uint8_t lanes_lo[64];
  alignas(64) uint8_t lanes_hi[64];
};
constexpr Masks make_masks() {
  Masks m{};
  for (int b = 0; b < 64; ++b) {
    const int lane = b / 16, byte = b % 2;
    for (int p = 0; p < 4; ++p)
      m.halves[p][b] = static_cast<uint8_t>(2 * (2 * p + lane / 2) + byte);
    m.lanes_lo[b] = static_cast<uint8_t>(2 * lane + byte);
    m.lanes_hi[b] = static_cast<uint8_t>(2 * (4 + lane) + byte);
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

// sum(sc_j * q_j * a_j) over one super-block of 16 groups of 16, where `v0`/`v1` hold the quants
// of 64 consecutive elements starting at group 8h and 8h + 4 and `sc` the eight int16 scales of
// groups 8h .. 8h+7 in every lane.
inline __m512i dot_groups16(__m512i acc, __m512i v0, __m512i v1, const int8_t* a, __m512i sc) {
  const __m512i p0 = _mm512_maddubs_epi16(v0, load512(a));
  const __m512i p1 = _mm512_maddubs_epi16(v1, load512(a + 64));
  acc = _mm512_dpwssd_epi32(acc, p0, _mm512_shuffle_epi8(sc, load512(kMasks.lanes_lo)));
  return _mm512_dpwssd_epi32(acc, p1, _mm512_shuffle_epi8(sc, load512(kMasks.lanes_hi)));
}

// ---------------------------------------------------------------------------------------------
// Dot products.

float vec_dot_q2k(int64_t n, const void* w, const void* act) {
  const auto* x = static_cast<const BlockQ2_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(act);
  const __m512i m3 = _mm512_set1_epi8(3);
  const __m128i m4 = _mm_set1_epi8(0x0f);
  __m512 acc = _mm512_setzero_ps();
  __m256 acc_m = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float d = y[i].d * f16_to_f32(x[i].d);
    const float dmin = y[i].d * f16_to_f32(x[i].dmin);
    const __m128i sm = load128(x[i].scales);
    const __m128i sc8 = _mm_and_si128(sm, m4);
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), m4));
    const __m256i prod_m = _mm256_madd_epi16(mins, load256(y[i].bsums));
    acc_m = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(prod_m), acc_m);
    const __m256i sc16 = _mm256_cvtepu8_epi16(sc8);
    __m512i sum0 = _mm512_setzero_si512(), sum1 = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      // [q, q >> 2]: fields 0 and 1 of the 32 bytes, then >> 4 gives fields 2 and 3.
      const __m512i qb = load256_twice(x[i].qs + 32 * h);
      const __m512i q = _mm512_mask_srli_epi16(qb, kUpper, qb, 2);
      const __m512i v01 = _mm512_and_si512(q, m3);
      const __m512i v23 = _mm512_and_si512(_mm512_srli_epi16(q, 4), m3);
      const __m512i sc = _mm512_broadcast_i32x4(h == 0 ? _mm256_castsi256_si128(sc16)
                                                       : _mm256_extracti128_si256(sc16, 1));
      __m512i& sum = h == 0 ? sum0 : sum1;
      sum = dot_groups16(sum, v01, v23, y[i].qs + 128 * h, sc);
    }
    acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(_mm512_add_epi32(sum0, sum1)), acc);
  }
  return _mm512_reduce_add_ps(acc) - hsum256(acc_m);
}

float vec_dot_q3k(int64_t n, const void* w, const void* act) {
  const auto* x = static_cast<const BlockQ3_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(act);
  const __m512i m3 = _mm512_set1_epi8(3);
  const __m512i four = _mm512_set1_epi8(4);
  // Bit of hmask holding the high bit of fields (2f, 2f + 1) of half h, f = 2h + pair:
  // lower 256 bits field 2f, upper 256 bits field 2f + 1.
  __m512i hsel[4];
  for (int f = 0; f < 4; ++f) {
    hsel[f] = _mm512_mask_blend_epi8(0xffffffff00000000ull,
                                     _mm512_set1_epi8(static_cast<char>(1 << (2 * f))),
                                     _mm512_set1_epi8(static_cast<char>(1 << (2 * f + 1))));
  }
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float d = y[i].d * f16_to_f32(x[i].d);
    uint32_t sw[4];
    unpack_q3k_scales_words(x[i].scales, sw);
    const __m128i sc8 =
        _mm_sub_epi8(_mm_set_epi32(static_cast<int>(sw[3]), static_cast<int>(sw[2]),
                                   static_cast<int>(sw[1]), static_cast<int>(sw[0])),
                     _mm_set1_epi8(32));
    const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
    // q = v - 4 with v = low | high << 2 in 0..7: the offset is -4 * sum(scale * block sum).
    const __m256i neg4 = _mm256_mullo_epi16(sc16, _mm256_set1_epi16(-4));
    __m512i sum0 = _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_zextsi256_si512(neg4),
                                       _mm512_zextsi256_si512(load256(y[i].bsums)));
    __m512i sum1 = _mm512_setzero_si512();
    const __m512i hm = load256_twice(x[i].hmask);
    for (int h = 0; h < 2; ++h) {
      const __m512i qb = load256_twice(x[i].qs + 32 * h);
      const __m512i q = _mm512_mask_srli_epi16(qb, kUpper, qb, 2);
      __m512i v01 = _mm512_and_si512(q, m3);
      __m512i v23 = _mm512_and_si512(_mm512_srli_epi16(q, 4), m3);
      v01 = _mm512_mask_add_epi8(v01, _mm512_test_epi8_mask(hm, hsel[2 * h]), v01, four);
      v23 = _mm512_mask_add_epi8(v23, _mm512_test_epi8_mask(hm, hsel[2 * h + 1]), v23, four);
      const __m512i sc = _mm512_broadcast_i32x4(h == 0 ? _mm256_castsi256_si128(sc16)
                                                       : _mm256_extracti128_si256(sc16, 1));
      __m512i& sum = h == 0 ? sum0 : sum1;
      sum = dot_groups16(sum, v01, v23, y[i].qs + 128 * h, sc);
    }
    acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(_mm512_add_epi32(sum0, sum1)), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

template <bool kFiveBit>
float vec_dot_k4_like(int64_t n, const void* w, const void* act) {
  using Block = std::conditional_t<kFiveBit, BlockQ5_K, BlockQ4_K>;
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(act);
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  const __m512i bit4 = _mm512_set1_epi8(0x10);
  // Q5_K: bit p of qh is the fifth bit of sub-block p; lower half sub-block 2p, upper 2p + 1.
  __m512i hsel[4];
  for (int p = 0; p < 4; ++p) {
    hsel[p] = _mm512_mask_blend_epi8(0xffffffff00000000ull,
                                     _mm512_set1_epi8(static_cast<char>(1 << (2 * p))),
                                     _mm512_set1_epi8(static_cast<char>(1 << (2 * p + 1))));
  }
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  __m256 acc_m = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    static_assert(offsetof(Block, dmin) == offsetof(Block, d) + 2);
    const __m128 dd = _mm_mul_ps(_mm_set1_ps(y[i].d), load_f16_pair(&x[i].d));  // d, dmin
    const __m128i sm = unpack_k4_scales_vec(x[i].scales);  // bytes: scales 0..7, mins 0..7
    // mins m0 m0 m1 m1 .. m7 m7 (int16) against the 16 block sums.
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));
    const __m256i prod_m = _mm256_madd_epi16(mins, load256(y[i].bsums));
    acc_m = _mm256_fmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(dd)), _mm256_cvtepi32_ps(prod_m),
                            acc_m);
    const __m512i sc = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(sm));
    const __m512 d = _mm512_broadcastss_ps(dd);

    const int8_t* a = y[i].qs;
    __m512i hb;
    if constexpr (kFiveBit) hb = load256_twice(x[i].qh);
    __m512i sum0 = _mm512_setzero_si512(), sum1 = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {
      // [low nibbles, high nibbles] of qs[32p..32p+31]: sub-blocks 2p and 2p+1 in element order.
      const __m512i qb = load256_twice(x[i].qs + 32 * p);
      __m512i v = _mm512_and_si512(_mm512_mask_srli_epi16(qb, kUpper, qb, 4), m4);
      if constexpr (kFiveBit)
        v = _mm512_mask_add_epi8(v, _mm512_test_epi8_mask(hb, hsel[p]), v, bit4);
      const __m512i prod = _mm512_maddubs_epi16(v, load512(a + 64 * p));
      const __m512i scale = _mm512_shuffle_epi8(sc, load512(kMasks.halves[p]));
      __m512i& sum = p % 2 == 0 ? sum0 : sum1;
      sum = _mm512_dpwssd_epi32(sum, prod, scale);
    }
    const __m512 s = _mm512_cvtepi32_ps(_mm512_add_epi32(sum0, sum1));
    if (i % 2 == 0) {
      acc0 = _mm512_fmadd_ps(d, s, acc0);
    } else {
      acc1 = _mm512_fmadd_ps(d, s, acc1);
    }
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) - hsum256(acc_m);
}

float vec_dot_q6k(int64_t n, const void* w, const void* act) {
  const auto* x = static_cast<const BlockQ6_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(act);
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  const __m512i m30 = _mm512_set1_epi8(0x30);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float d = y[i].d * f16_to_f32(x[i].d);
    const __m256i sc16 = _mm256_cvtepi8_epi16(load128(x[i].scales));
    // q = v - 32 with v in 0..63: the offset is -32 * sum(scale * block sum).
    const __m256i neg32 = _mm256_mullo_epi16(sc16, _mm256_set1_epi16(-32));
    __m512i sum0 = _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_zextsi256_si512(neg32),
                                       _mm512_zextsi256_si512(load256(y[i].bsums)));
    __m512i sum1 = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      const __m512i l = load512(x[i].ql + 64 * h);
      const __m512i qh = load256_twice(x[i].qh + 32 * h);
      // Elements 0..63 of the half: low nibbles of ql, high bits (qh >> 0) & 3 (lower 256 bits)
      // and (qh >> 2) & 3 (upper), moved to bits 4-5.
      const __m512i t = _mm512_slli_epi16(qh, 2);
      const __m512i h01 = _mm512_mask_slli_epi16(t, kLower, t, 2);
      // Elements 64..127: high nibbles of ql, high bits (qh >> 4) & 3 and (qh >> 6) & 3.
      const __m512i h23 = _mm512_mask_srli_epi16(qh, kUpper, qh, 2);
      // a | (b & c), a = nibbles, b = high bits, c = 0x30
      const __m512i v01 = _mm512_ternarylogic_epi32(_mm512_and_si512(l, m4), h01, m30, 0xf8);
      const __m512i v23 =
          _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4), h23, m30, 0xf8);
      const __m512i sc = _mm512_broadcast_i32x4(h == 0 ? _mm256_castsi256_si128(sc16)
                                                       : _mm256_extracti128_si256(sc16, 1));
      __m512i& sum = h == 0 ? sum0 : sum1;
      sum = dot_groups16(sum, v01, v23, y[i].qs + 128 * h, sc);
    }
    acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(_mm512_add_epi32(sum0, sum1)), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

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
  table[GgmlType::Q2_K].vec_dot = vec_dot_q2k;
  table[GgmlType::Q3_K].vec_dot = vec_dot_q3k;
  table[GgmlType::Q4_K].vec_dot = vec_dot_k4_like<false>;
  table[GgmlType::Q5_K].vec_dot = vec_dot_k4_like<true>;
  table[GgmlType::Q6_K].vec_dot = vec_dot_q6k;
  table[GgmlType::Q8_K].quantize_row = quantize_q8k;
}

}  // namespace strata::quant
