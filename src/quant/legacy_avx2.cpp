// AVX2 + FMA + F16C kernels of the legacy formats. One block of 32 elements per 256-bit register.
//
// Dot products: the weight codes are brought to 32 unsigned bytes (Q4: 0..15, Q5: 0..31, with the
// offset 8 / 16 still in), multiplied with the signed activation bytes by vpmaddubsw, and the
// offset is taken back out as offset * (sum of the activation bytes), in the same 16-bit lanes.
// Q8_0 x Q8_0 moves the weight signs onto the activations (|w| * sign(w) a). Blocks go 4 per
// step: their f16 scales are converted together, each block's integer sums are converted once
// and scaled into float accumulators, and the horizontal sum runs once per row.

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "quant/kernel_table.h"
#include "quant/legacy_common.h"
#include "quant/multi_dot.h"

namespace strata::quant {
namespace {

float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

float f16(uint16_t h) {
  return _cvtsh_ss(h);
}

// A 32-byte load kept in a register (the empty asm stops GCC from folding a second load of the
// same bytes into each instruction that uses them).
__m256i load32(const void* p) {
  __m256i v = _mm256_loadu_si256(static_cast<const __m256i*>(p));
  __asm__("" : "+x"(v));
  return v;
}

// The 32 nibbles of a Q4/Q5 block as bytes: element j (low nibble of qs[j]) in byte j, element
// j + 16 (high nibble) in byte j + 16.
__m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(x, 4), x);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

// Byte j = 0x10 where bit j of qh is set, else 0: the fifth bit of the Q5 codes.
__m256i expand_high_bits(uint32_t qh) {
  // Byte j takes byte j / 8 of qh, then tests bit j % 8 of it.
  const __m256i spread =
      _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)), spread);
  v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
  return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

// sum over 4-element groups of u[k] * s[k] (u unsigned < 32, s signed): 8 x int32.
__m256i dot_u8_i8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// sum of (u[k] - offset) * s[k] in 8 x int32, for u < 32 and offset <= 16 (no 16-bit overflow).
__m256i dot_u8_i8_offset(__m256i u, __m256i s, __m256i offset) {
  const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(u, s), _mm256_maddubs_epi16(offset, s));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

// ---- per-block integer sums ------------------------------------------------------------------
// Each format: decode() brings a weight block's codes into a register (once per block, however many
// activation rows it meets), sums() its 8 int32 sums against one activation block.

struct Q4_0 {
  using W = BlockQ4_0;
  using A = BlockQ8_0;
  static constexpr bool kHasMin = false;
  using Code = __m256i;
  static Code decode(const W& w) { return unpack_nibbles(w.qs); }
  static __m256i sums(const Code& q, const A& a) {
    return dot_u8_i8_offset(q, load32(a.qs), _mm256_set1_epi8(8));
  }
};
struct Q4_1 {
  using W = BlockQ4_1;
  using A = BlockQ8_1;
  static constexpr bool kHasMin = true;
  using Code = __m256i;
  static Code decode(const W& w) { return unpack_nibbles(w.qs); }
  static __m256i sums(const Code& q, const A& a) { return dot_u8_i8(q, load32(a.qs)); }
};
struct Q5_0 {
  using W = BlockQ5_0;
  using A = BlockQ8_0;
  static constexpr bool kHasMin = false;
  using Code = __m256i;
  static Code decode(const W& w) {
    return _mm256_or_si256(unpack_nibbles(w.qs), expand_high_bits(load_qh(w.qh)));
  }
  static __m256i sums(const Code& q, const A& a) {
    return dot_u8_i8_offset(q, load32(a.qs), _mm256_set1_epi8(16));
  }
};
struct Q5_1 {
  using W = BlockQ5_1;
  using A = BlockQ8_1;
  static constexpr bool kHasMin = true;
  using Code = __m256i;
  static Code decode(const W& w) {
    return _mm256_or_si256(unpack_nibbles(w.qs), expand_high_bits(load_qh(w.qh)));
  }
  static __m256i sums(const Code& q, const A& a) { return dot_u8_i8(q, load32(a.qs)); }
};
// Signed x signed: |w| * (a with the sign of w).
struct Q8_0 {
  using W = BlockQ8_0;
  using A = BlockQ8_0;
  static constexpr bool kHasMin = false;
  struct Code {
    __m256i w, abs;
  };
  static Code decode(const W& w) {
    const __m256i q = load32(w.qs);
    return {q, _mm256_sign_epi8(q, q)};
  }
  static __m256i sums(const Code& q, const A& a) {
    return dot_u8_i8(q.abs, _mm256_sign_epi8(load32(a.qs), q.w));
  }
};

// ---- dot products -----------------------------------------------------------------------------
// 4 blocks per step: their f16 scales are converted together (d_w * d_a per block; for Q4_1 / Q5_1
// also m * s), each block's 8 int32 sums are converted and scaled into one of two accumulators.
// A row's last 1-3 blocks go through a zero-padded copy of 4 blocks (scale 0 adds nothing).
// Written for N activation rows at once (vec_dot_multi): the 4 weight blocks of a step are decoded
// once and dotted with each row; vec_dot is the same kernel with one row (bit-identical results).

constexpr int kStep = 4;

uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename F>
struct Multi {
  using W = typename F::W;
  using A = typename F::A;

  // The weight half of a step: codes of the 4 blocks, and their f16 fields as floats (d in lanes
  // 0..3; with a min, [d, m] of block k in lanes 2k, 2k + 1).
  struct Decoded {
    typename F::Code code[kStep];
    __m256 d;
  };
  static Decoded decode(const W* w) {
    Decoded x;
    for (int k = 0; k < kStep; ++k) x.code[k] = F::decode(w[k]);
    if constexpr (F::kHasMin) {
      // (d, m) are the first 4 bytes of the block.
      x.d = _mm256_cvtph_ps(
          _mm_setr_epi32(static_cast<int>(load_u32(&w[0])), static_cast<int>(load_u32(&w[1])),
                         static_cast<int>(load_u32(&w[2])), static_cast<int>(load_u32(&w[3]))));
    } else {
      x.d = _mm256_castps128_ps256(_mm_cvtph_ps(
          _mm_setr_epi16(static_cast<short>(w[0].d), static_cast<short>(w[1].d),
                         static_cast<short>(w[2].d), static_cast<short>(w[3].d), 0, 0, 0, 0)));
    }
    return x;
  }

  // The activation half of a step's scales: d of block k in lane k (with a min, [d, s] of block k
  // in lanes 2k, 2k + 1).
  static __m256 activation_scales(const A* a) {
    if constexpr (F::kHasMin) {
      // (d, s) are the first 4 bytes of the block.
      return _mm256_cvtph_ps(
          _mm_setr_epi32(static_cast<int>(load_u32(&a[0])), static_cast<int>(load_u32(&a[1])),
                         static_cast<int>(load_u32(&a[2])), static_cast<int>(load_u32(&a[3]))));
    } else {
      return _mm256_castps128_ps256(_mm_cvtph_ps(
          _mm_setr_epi16(static_cast<short>(a[0].d), static_cast<short>(a[1].d),
                         static_cast<short>(a[2].d), static_cast<short>(a[3].d), 0, 0, 0, 0)));
    }
  }

  static void column(const Decoded& x, const A* a, __m256& acc0, __m256& acc1, __m256& pairs) {
    column(x, a, activation_scales(a), acc0, acc1, pairs);
  }
  // The same with a's activation_scales computed ahead.
  static void column(const Decoded& x, const A* a, __m256 a_scales, __m256& acc0, __m256& acc1,
                     __m256& pairs) {
    __m256 s;  // d_w * d_a of block k in lane k (lane 2k with a min)
    if constexpr (F::kHasMin) {
      // [d_w*d_a, m*s] in lanes 2k, 2k+1.
      s = _mm256_mul_ps(x.d, a_scales);
      pairs = _mm256_add_ps(pairs, s);
    } else {
      s = _mm256_castps128_ps256(
          _mm_mul_ps(_mm256_castps256_ps128(x.d), _mm256_castps256_ps128(a_scales)));
    }
    constexpr int kStride = F::kHasMin ? 2 : 1;
    const auto scale = [&](int k) {
      return _mm256_permutevar8x32_ps(s, _mm256_set1_epi32(k * kStride));
    };
    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(F::sums(x.code[0], a[0])), scale(0), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(F::sums(x.code[1], a[1])), scale(1), acc1);
    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(F::sums(x.code[2], a[2])), scale(2), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(F::sums(x.code[3], a[3])), scale(3), acc1);
  }

  template <int N>
  static void run(int64_t n, const void* weights, const uint8_t* act, int64_t stride, float* out) {
    const auto* w = static_cast<const W*>(weights);
    const Columns<A, N> a(act, stride);
    const int64_t nb = n / kQK;
    const int64_t full = nb - nb % kStep;
    __m256 acc0[N], acc1[N], pairs[N];
    for (int j = 0; j < N; ++j) acc0[j] = acc1[j] = pairs[j] = _mm256_setzero_ps();
    if (full < nb) {  // first, so that no call to memcpy follows the main loop
      W wt[kStep];
      A at[N][kStep];
      std::memset(static_cast<void*>(wt), 0, sizeof wt);
      std::memset(static_cast<void*>(at), 0, sizeof at);
      std::memcpy(static_cast<void*>(wt), w + full, static_cast<size_t>(nb - full) * sizeof(W));
      for (int j = 0; j < N; ++j) {
        std::memcpy(static_cast<void*>(at[j]), a[j] + full,
                    static_cast<size_t>(nb - full) * sizeof(A));
      }
      const Decoded x = decode(wt);
      for (int j = 0; j < N; ++j) column(x, at[j], acc0[j], acc1[j], pairs[j]);
    }
    for (int64_t i = 0; i < full; i += kStep) {
      const Decoded x = decode(w + i);
      for (int j = 0; j < N; ++j) column(x, a[j] + i, acc0[j], acc1[j], pairs[j]);
    }
    for (int j = 0; j < N; ++j) {
      float total = hsum(_mm256_add_ps(acc0[j], acc1[j]));
      if constexpr (F::kHasMin) total += hsum(_mm256_blend_ps(_mm256_setzero_ps(), pairs[j], 0xaa));
      out[j] = total;
    }
  }
};

// Decode's GEMV: one activation row against `rows` weight rows. The activation's scales of every
// step are converted once per call, and its last 1-3 blocks padded once, instead of once per row;
// each row then runs run<1>'s operations in its order, so out[r] is vec_dot of row r bit for bit.
template <typename F>
void gemv(int64_t n, const void* weights, int64_t row_stride, int64_t rows, const void* activations,
          float* out) {
  using M = Multi<F>;
  using W = typename F::W;
  using A = typename F::A;
  if (rows <= 0) return;
  const auto* a = static_cast<const A*>(activations);
  const int64_t nb = n / kQK;
  const int64_t full = nb - nb % kStep;
  const int64_t steps = full / kStep;
  struct StepScales {
    __m256 v;
  };
  StepScales* scales = gemv_scratch<StepScales>(steps);
  for (int64_t k = 0; k < steps; ++k) scales[k].v = M::activation_scales(a + k * kStep);
  A tail[kStep];
  std::memset(static_cast<void*>(tail), 0, sizeof tail);
  std::memcpy(static_cast<void*>(tail), a + full, static_cast<size_t>(nb - full) * sizeof(A));
  const __m256 tail_scales = M::activation_scales(tail);
  const auto* w8 = static_cast<const uint8_t*>(weights);
  for (int64_t r = 0; r < rows; ++r) {
    const auto* w = reinterpret_cast<const W*>(w8 + r * row_stride);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), pairs = _mm256_setzero_ps();
    if (full < nb) {
      W wt[kStep];
      std::memset(static_cast<void*>(wt), 0, sizeof wt);
      std::memcpy(static_cast<void*>(wt), w + full, static_cast<size_t>(nb - full) * sizeof(W));
      M::column(M::decode(wt), tail, tail_scales, acc0, acc1, pairs);
    }
    for (int64_t i = 0; i < full; i += kStep)
      M::column(M::decode(w + i), a + i, scales[i / kStep].v, acc0, acc1, pairs);
    float total = hsum(_mm256_add_ps(acc0, acc1));
    if constexpr (F::kHasMin) total += hsum(_mm256_blend_ps(_mm256_setzero_ps(), pairs, 0xaa));
    out[r] = total;
  }
}

template <typename F>
float vec_dot(int64_t n, const void* weights, const void* activations) {
  float out;
  Multi<F>::template run<1>(n, weights, static_cast<const uint8_t*>(activations), 0, &out);
  return out;
}

// ---- activation quantizers --------------------------------------------------------------------

// Round to nearest, ties away from zero (C roundf): truncate, then step away from zero where the
// dropped fraction (exact) is at least one half.
__m256 round_half_away(__m256 v) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 fraction = _mm256_andnot_ps(sign_bit, _mm256_sub_ps(v, t));
  const __m256 step = _mm256_or_ps(_mm256_and_ps(v, sign_bit), _mm256_set1_ps(1.0f));  // +-1
  const __m256 away = _mm256_cmp_ps(fraction, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  return _mm256_add_ps(t, _mm256_and_ps(away, step));
}

// One block of 32 floats to d (f16) and 32 codes, exactly as the scalar reference; returns the
// unrounded d and the sum of the codes.
Q8BlockScale quantize_q8_block(const float* x, int8_t* qs) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
  const __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
  __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                           _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float d = q8_block_scale(_mm_cvtss_f32(m4));
  const __m256 id = _mm256_set1_ps(q8_block_inverse(d));
  const f16_bits d16 = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
  const __m256i i0 = _mm256_cvttps_epi32(round_half_away(_mm256_mul_ps(v0, id)));
  const __m256i i1 = _mm256_cvttps_epi32(round_half_away(_mm256_mul_ps(v1, id)));
  const __m256i i2 = _mm256_cvttps_epi32(round_half_away(_mm256_mul_ps(v2, id)));
  const __m256i i3 = _mm256_cvttps_epi32(round_half_away(_mm256_mul_ps(v3, id)));
  const int sum = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3)));
  // Narrow 4 x 8 int32 to 32 int8; the packs interleave 128-bit lanes, the permute undoes it.
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
  const __m256i ordered = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), ordered);
  return {d, d16, sum};
}

void quantize_q8_0(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) b[i].d = quantize_q8_block(src + i * kQK, b[i].qs).d16;
}

void quantize_q8_1(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const Q8BlockScale q = quantize_q8_block(src + i * kQK, b[i].qs);
    b[i].d = q.d16;
    b[i].s = _cvtss_sh(static_cast<float>(q.sum) * q.d, _MM_FROUND_TO_NEAREST_INT);
  }
}

// ---- dequantization ---------------------------------------------------------------------------

// Stores 32 signed bytes as floats q * d (+ m, fused as in the scalar reference).
template <bool kHasMin>
void store_scaled(__m256i q, float d, float m, float* dst) {
  const __m256 vd = _mm256_set1_ps(d), vm = _mm256_set1_ps(m);
  const __m128i halves[2] = {_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1)};
  for (int h = 0; h < 2; ++h) {
    const __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(halves[h]));
    const __m256 hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(halves[h], 8)));
    if constexpr (kHasMin) {
      _mm256_storeu_ps(dst + 16 * h, _mm256_fmadd_ps(lo, vd, vm));
      _mm256_storeu_ps(dst + 16 * h + 8, _mm256_fmadd_ps(hi, vd, vm));
    } else {
      _mm256_storeu_ps(dst + 16 * h, _mm256_mul_ps(lo, vd));
      _mm256_storeu_ps(dst + 16 * h + 8, _mm256_mul_ps(hi, vd));
    }
  }
}

void dequantize_q4_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i q = _mm256_sub_epi8(unpack_nibbles(b[i].qs), _mm256_set1_epi8(8));
    store_scaled<false>(q, f16(b[i].d), 0.0f, dst + i * kQK);
  }
}

void dequantize_q4_1(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    store_scaled<true>(unpack_nibbles(b[i].qs), f16(b[i].d), f16(b[i].m), dst + i * kQK);
  }
}

void dequantize_q5_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i q = _mm256_or_si256(unpack_nibbles(b[i].qs), expand_high_bits(load_qh(b[i].qh)));
    store_scaled<false>(_mm256_sub_epi8(q, _mm256_set1_epi8(16)), f16(b[i].d), 0.0f, dst + i * kQK);
  }
}

void dequantize_q5_1(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i q = _mm256_or_si256(unpack_nibbles(b[i].qs), expand_high_bits(load_qh(b[i].qh)));
    store_scaled<true>(q, f16(b[i].d), f16(b[i].m), dst + i * kQK);
  }
}

void dequantize_q8_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    store_scaled<false>(load32(b[i].qs), f16(b[i].d), 0.0f, dst + i * kQK);
  }
}

void dequantize_q8_1(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    store_scaled<false>(load32(b[i].qs), f16(b[i].d), 0.0f, dst + i * kQK);
  }
}

}  // namespace

void fill_legacy_avx2(KernelTable& table) {
  // Weight types: no fast weight quantizer (the reference one is used).
  table[GgmlType::Q4_0] = {dequantize_q4_0, nullptr, vec_dot<Q4_0>, vec_dot_multi_of<Multi<Q4_0>>,
                           gemv<Q4_0>};
  table[GgmlType::Q4_1] = {dequantize_q4_1, nullptr, vec_dot<Q4_1>, vec_dot_multi_of<Multi<Q4_1>>,
                           gemv<Q4_1>};
  table[GgmlType::Q5_0] = {dequantize_q5_0, nullptr, vec_dot<Q5_0>, vec_dot_multi_of<Multi<Q5_0>>,
                           gemv<Q5_0>};
  table[GgmlType::Q5_1] = {dequantize_q5_1, nullptr, vec_dot<Q5_1>, vec_dot_multi_of<Multi<Q5_1>>,
                           gemv<Q5_1>};
  table[GgmlType::Q8_0] = {dequantize_q8_0, quantize_q8_0, vec_dot<Q8_0>,
                           vec_dot_multi_of<Multi<Q8_0>>, gemv<Q8_0>};
  table[GgmlType::Q8_1] = {dequantize_q8_1, quantize_q8_1, nullptr};
}

}  // namespace strata::quant
