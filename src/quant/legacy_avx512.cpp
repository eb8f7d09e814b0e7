// AVX-512 (F/BW/VL/DQ) + VNNI kernels of the legacy formats.
//
// Dot products run 4 blocks per step. vpdpbusd multiplies unsigned weight codes with the signed
// activation bytes:
//   Q5_0:        codes 0..31 still carry the offset 16, taken back out as 16 * sum(activations)
//                with a second vpdpbusd against a constant;
//   Q4_1 / Q5_1: codes times activations, plus m * s per block (s = d * sum(activations) is stored
//                in the Q8_1 block).
// Blocks are 20..24 bytes, so a step's fields are fetched with word permutes (vpermt2w) from
// 64-byte loads of the step's bytes. The codes keep the nibble order of the file: one register
// holds the 4 blocks' low nibbles (128-bit lane k = elements 0..15 of block k), another the high
// nibbles (elements 16..31), and the activations are gathered to match. The 4 blocks' f16 scales
// are converted together, multiplied and spread over their blocks' lanes; the int32 sums are
// scaled into float accumulators, summed horizontally once per row. A row's last 1-3 blocks go
// through a zero-padded copy of 4 blocks (scale 0 adds nothing).
//
// Q4_0 and Q8_0 run as quads (quad_avx512.h), in the float order of their tile GEMM.

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "quant/kernel_table.h"
#include "quant/legacy_common.h"
#include "quant/multi_dot.h"
#include "quant/quad_avx512.h"

namespace strata::quant {
namespace {

constexpr int kStep = 4;  // blocks per step

// The step functions and their helpers must inline into the row loop: accumulators passed by
// reference to an outlined copy would live in memory.
#define STRATA_STEP inline __attribute__((always_inline))

// ---- fetching fields of 4 consecutive blocks ------------------------------------------------

// Two loads at byte offsets kFirst (64 bytes) and kSecond (kSecondBytes) of a step; gather()
// picks 16-bit words of either by their byte offset in the step.
template <int kFirst, int kSecond, int kSecondBytes = 64>
struct Windows {
  __m512i first, second;
  explicit Windows(const void* step)
      : first(load_window(static_cast<const uint8_t*>(step) + kFirst)),
        second(load_window<kSecondBytes>(static_cast<const uint8_t*>(step) + kSecond)) {}

  // vpermt2w index of the 16-bit word at `byte` (even) of the step.
  static constexpr uint16_t word(int byte) {
    if (byte >= kFirst && byte + 2 <= kFirst + 64)
      return static_cast<uint16_t>((byte - kFirst) / 2);
    if (byte >= kSecond && byte + 2 <= kSecond + kSecondBytes) {
      return static_cast<uint16_t>(32 + (byte - kSecond) / 2);
    }
    throw "byte outside both windows";  // a compile error: only used in constant expressions
  }
  __m512i gather(__m512i index) const { return _mm512_permutex2var_epi16(first, index, second); }
};

// Words 0..3: the f16 at `offset` of blocks 0..3. With kPairs, words 2k and 2k+1: the f16 pair at
// `offset` of block k (d and m, or d and s).
template <typename Win, int kBlockBytes, bool kPairs>
constexpr WordIndex half_index(int offset) {
  WordIndex idx{};
  for (int k = 0; k < kStep; ++k) {
    if (kPairs) {
      idx.v[2 * k] = Win::word(k * kBlockBytes + offset);
      idx.v[2 * k + 1] = Win::word(k * kBlockBytes + offset + 2);
    } else {
      idx.v[k] = Win::word(k * kBlockBytes + offset);
    }
  }
  return idx;
}

// 128-bit lane k (for k in [first_lane, last_lane], others 0): the 16 bytes at `offset` of block k.
template <typename Win, int kBlockBytes>
constexpr WordIndex lane_index(int offset, int first_lane = 0, int last_lane = kStep - 1) {
  WordIndex idx{};
  for (int j = 8 * first_lane; j < 8 * (last_lane + 1); ++j) {
    idx.v[j] = Win::word((j / 8) * kBlockBytes + offset + 2 * (j % 8));
  }
  return idx;
}

// ---- integer dot products -------------------------------------------------------------------

// int32 lanes of sum((lo - offset) * a_lo) + sum((hi - offset) * a_hi) over groups of 4 bytes.
STRATA_STEP __m512i dot_nibbles_offset(__m512i lo, __m512i a_lo, __m512i hi, __m512i a_hi,
                                       __m512i offset) {
  const __m512i zero = _mm512_setzero_si512();
  const __m512i p = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, lo, a_lo), hi, a_hi);
  const __m512i o = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, offset, a_lo), offset, a_hi);
  return _mm512_sub_epi32(p, o);
}

STRATA_STEP __m512i dot_nibbles(__m512i lo, __m512i a_lo, __m512i hi, __m512i a_hi) {
  return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, a_lo), hi, a_hi);
}

// ---- weights and activations of one step ----------------------------------------------------

// The step's weight bytes (72..96): 64 at 0 and the rest in the smallest load that ends at the
// step's last byte.
constexpr int rest_load_bytes(int span) {
  return span - 64 <= 16 ? 16 : span - 64 <= 32 ? 32 : 64;
}
template <typename W>
using WeightWindows =
    Windows<0, kStep* static_cast<int>(sizeof(W)) - rest_load_bytes(kStep * sizeof(W)),
            rest_load_bytes(kStep * sizeof(W))>;

// Codes of 4 blocks: lane k of lo = elements 0..15 of block k (low nibbles), of hi = 16..31.
template <typename W>
STRATA_STEP void nibbles(const WeightWindows<W>& win, __m512i& lo, __m512i& hi) {
  static constexpr WordIndex kQs =
      lane_index<WeightWindows<W>, static_cast<int>(sizeof(W))>(static_cast<int>(offsetof(W, qs)));
  const __m512i q = win.gather(kQs.load());
  const __m512i mask = _mm512_set1_epi8(0x0f);
  lo = _mm512_and_si512(q, mask);
  hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), mask);
}

// Q5: adds 16 to the codes whose bit is set in qh (bit j of block k = element j).
template <typename W>
STRATA_STEP void add_high_bits(const WeightWindows<W>& win, __m512i& lo, __m512i& hi) {
  static constexpr WordIndex kQh = [] {
    constexpr int kBytes = static_cast<int>(sizeof(W));
    WordIndex idx{};
    for (int k = 0; k < kStep; ++k) {
      const int qh = k * kBytes + static_cast<int>(offsetof(W, qh));
      idx.v[k] = WeightWindows<W>::word(qh);          // bits 0..15: low nibbles
      idx.v[4 + k] = WeightWindows<W>::word(qh + 2);  // bits 16..31: high nibbles
    }
    return idx;
  }();
  const __m128i bits = _mm512_castsi512_si128(win.gather(kQh.load()));
  const __mmask64 lo_bits = _cvtu64_mask64(static_cast<uint64_t>(_mm_cvtsi128_si64(bits)));
  const __mmask64 hi_bits = _cvtu64_mask64(static_cast<uint64_t>(_mm_extract_epi64(bits, 1)));
  const __m512i sixteen = _mm512_set1_epi8(16);
  lo = _mm512_mask_add_epi8(lo, lo_bits, lo, sixteen);
  hi = _mm512_mask_add_epi8(hi, hi_bits, hi, sixteen);
}

// Activation bytes of 4 blocks (Q8_0: 136, Q8_1: 144) in the order of the nibbles: lane k of lo =
// elements 0..15 of block k, of hi = 16..31; from `head` ([0, 128), which also holds the f16
// fields) and the last 128 bytes. (Three loads that cover the step once cost a blend and a
// permute more, and measured slower: the activations are read from cache.)
template <typename A>
struct Activations {
  static constexpr int kBytes = static_cast<int>(sizeof(A));
  static constexpr int kSpan = kStep * kBytes;
  static constexpr int kQs = static_cast<int>(offsetof(A, qs));
  using Head = Windows<0, 64>;
  using Tail = Windows<kSpan - 128, kSpan - 64>;
  static constexpr WordIndex kLo = lane_index<Head, kBytes>(kQs);
  static constexpr WordIndex kHi = lane_index<Tail, kBytes>(kQs + 16);

  Head head;
  __m512i lo, hi;
  explicit Activations(const A* a) : head(a) {
    lo = head.gather(kLo.load());
    hi = Tail(a).gather(kHi.load());
  }
};

// ---- scales ---------------------------------------------------------------------------------

// Lanes 4k..4k+3 take lane k * kStride of `scales`.
template <int kStride>
STRATA_STEP __m512 spread4(__m512 scales) {
  constexpr int s = kStride;
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, s, s, s, s, 2 * s, 2 * s, 2 * s, 2 * s,
                                                 3 * s, 3 * s, 3 * s, 3 * s),
                               scales);
}

// ---- one step of 4 blocks per type ----------------------------------------------------------
// A step is split in two: decode() unpacks the 4 weight blocks (codes and scales) into registers,
// column() dots them with the 4 blocks of one activation row and adds the scaled sums to acc;
// Q4_1 / Q5_1 also add [d products, m*s] pairs to `pairs`. vec_dot runs both once per step,
// vec_dot_multi decodes once and runs column() for every activation row.

// Q5_0 (codes with the offset kOffset = 16) against Q8_0.
template <typename WBlock, int kOffset>
struct StepOffset {
  using W = WBlock;
  using A = BlockQ8_0;
  using L = Activations<A>;
  struct Decoded {
    __m512i lo, hi;
    __m128 d;  // d of the 4 weight blocks
  };
  static STRATA_STEP Decoded decode(const W* w) {
    static constexpr WordIndex kW = half_index<WeightWindows<W>, sizeof(W), false>(0);
    const WeightWindows<W> ww(w);
    Decoded x;
    nibbles<W>(ww, x.lo, x.hi);
    if constexpr (kOffset == 16) add_high_bits<W>(ww, x.lo, x.hi);
    x.d = _mm_cvtph_ps(_mm512_castsi512_si128(ww.gather(kW.load())));
    return x;
  }
  static STRATA_STEP void column(const Decoded& x, const A* a, __m512& acc, __m256&) {
    static constexpr WordIndex kA = half_index<typename L::Head, L::kBytes, false>(0);
    const L act(a);
    const __m128 da = _mm_cvtph_ps(_mm512_castsi512_si128(act.head.gather(kA.load())));
    const __m128 s = _mm_mul_ps(x.d, da);
    const __m512i sums = dot_nibbles_offset(x.lo, act.lo, x.hi, act.hi, _mm512_set1_epi8(kOffset));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), spread4<1>(_mm512_castps128_ps512(s)), acc);
  }
};

// Q4_1 and Q5_1 against Q8_1.
template <typename WBlock, bool kQ5>
struct StepMin {
  using W = WBlock;
  using A = BlockQ8_1;
  using L = Activations<A>;
  struct Decoded {
    __m512i lo, hi;
    __m256 dm;  // [d, m] of block k in lanes 2k, 2k+1
  };
  static STRATA_STEP Decoded decode(const W* w) {
    static constexpr WordIndex kW = half_index<WeightWindows<W>, sizeof(W), true>(0);
    const WeightWindows<W> ww(w);
    Decoded x;
    nibbles<W>(ww, x.lo, x.hi);
    if constexpr (kQ5) add_high_bits<W>(ww, x.lo, x.hi);
    x.dm = _mm256_cvtph_ps(_mm512_castsi512_si128(ww.gather(kW.load())));
    return x;
  }
  static STRATA_STEP void column(const Decoded& x, const A* a, __m512& acc, __m256& pairs) {
    static constexpr WordIndex kA = half_index<typename L::Head, L::kBytes, true>(0);
    const L act(a);
    const __m256 ds = _mm256_cvtph_ps(_mm512_castsi512_si128(act.head.gather(kA.load())));
    const __m256 s = _mm256_mul_ps(x.dm, ds);
    pairs = _mm256_add_ps(pairs, s);
    const __m512i sums = dot_nibbles(x.lo, act.lo, x.hi, act.hi);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), spread4<2>(_mm512_castps256_ps512(s)), acc);
  }
};

// The result of a row from its two accumulators; the m*s products sit in the odd lanes of `pairs`
// (zero for types without a min).
STRATA_STEP float finish(__m512 acc0, __m512 acc1, __m256 pairs) {
  const __m256 odd = _mm256_blend_ps(_mm256_setzero_ps(), pairs, 0xaa);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(odd), _mm256_extractf128_ps(odd, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + _mm_cvtss_f32(s);
}

// The padded tail first (so that no call to memcpy follows the main loop, which would make GCC
// keep the accumulators in memory), then two steps per iteration into two accumulators.
template <typename Step>
float vec_dot(int64_t n, const void* weights, const void* activations) {
  using W = typename Step::W;
  using A = typename Step::A;
  const auto* w = static_cast<const W*>(weights);
  const auto* a = static_cast<const A*>(activations);
  const int64_t nb = n / kQK;
  const int64_t full = nb - nb % kStep;
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  __m256 pairs = _mm256_setzero_ps();
  if (full < nb) {
    W wt[kStep];
    A at[kStep];
    std::memset(static_cast<void*>(wt), 0, sizeof wt);
    std::memset(static_cast<void*>(at), 0, sizeof at);
    std::memcpy(static_cast<void*>(wt), w + full, static_cast<size_t>(nb - full) * sizeof(W));
    std::memcpy(static_cast<void*>(at), a + full, static_cast<size_t>(nb - full) * sizeof(A));
    Step::column(Step::decode(wt), at, acc1, pairs);
  }
  int64_t i = 0;
  for (; i + 2 * kStep <= full; i += 2 * kStep) {
    Step::column(Step::decode(w + i), a + i, acc0, pairs);
    Step::column(Step::decode(w + i + kStep), a + i + kStep, acc1, pairs);
  }
  if (i < full) Step::column(Step::decode(w + i), a + i, acc0, pairs);
  return finish(acc0, acc1, pairs);
}

// The same for N activation rows: every step is decoded once, and each row follows exactly the
// single-row sequence of operations (bit-identical results).
template <typename Step>
struct MultiDot {
  template <int N>
  static void run(int64_t n, const void* weights, const uint8_t* act, int64_t stride, float* out) {
    using W = typename Step::W;
    using A = typename Step::A;
    const auto* w = static_cast<const W*>(weights);
    const Columns<A, N> a(act, stride);
    const int64_t nb = n / kQK;
    const int64_t full = nb - nb % kStep;
    __m512 acc0[N], acc1[N];
    __m256 pairs[N];
    for (int j = 0; j < N; ++j) {
      acc0[j] = acc1[j] = _mm512_setzero_ps();
      pairs[j] = _mm256_setzero_ps();
    }
    if (full < nb) {
      W wt[kStep];
      A at[N][kStep];
      std::memset(static_cast<void*>(wt), 0, sizeof wt);
      std::memset(static_cast<void*>(at), 0, sizeof at);
      std::memcpy(static_cast<void*>(wt), w + full, static_cast<size_t>(nb - full) * sizeof(W));
      for (int j = 0; j < N; ++j) {
        std::memcpy(static_cast<void*>(at[j]), a[j] + full,
                    static_cast<size_t>(nb - full) * sizeof(A));
      }
      const auto x = Step::decode(wt);
      for (int j = 0; j < N; ++j) Step::column(x, at[j], acc1[j], pairs[j]);
    }
    int64_t i = 0;
    for (; i + 2 * kStep <= full; i += 2 * kStep) {
      const auto x0 = Step::decode(w + i);
      for (int j = 0; j < N; ++j) Step::column(x0, a[j] + i, acc0[j], pairs[j]);
      const auto x1 = Step::decode(w + i + kStep);
      for (int j = 0; j < N; ++j) Step::column(x1, a[j] + i + kStep, acc1[j], pairs[j]);
    }
    if (i < full) {
      const auto x = Step::decode(w + i);
      for (int j = 0; j < N; ++j) Step::column(x, a[j] + i, acc0[j], pairs[j]);
    }
    for (int j = 0; j < N; ++j) out[j] = finish(acc0[j], acc1[j], pairs[j]);
  }
};

#undef STRATA_STEP

// ---- activation quantizers --------------------------------------------------------------------

// Round to nearest, ties away from zero (C roundf): truncate, then step away from zero where the
// dropped fraction (exact) is at least one half.
__m512 round_half_away(__m512 v) {
  const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __mmask16 away =
      _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(v, t)), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN));
  const __m512 step = _mm512_castsi512_ps(_mm512_or_si512(sign, _mm512_set1_epi32(0x3f800000)));
  return _mm512_mask_add_ps(t, away, t, step);
}

// One block of 32 floats to d (f16) and 32 codes, exactly as the scalar reference; returns the
// unrounded d and the sum of the codes.
Q8BlockScale quantize_q8_block(const float* x, int8_t* qs) {
  const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  const float d = q8_block_scale(amax);
  const __m512 id = _mm512_set1_ps(q8_block_inverse(d));
  const f16_bits d16 = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
  const __m512i i0 = _mm512_cvttps_epi32(round_half_away(_mm512_mul_ps(v0, id)));
  const __m512i i1 = _mm512_cvttps_epi32(round_half_away(_mm512_mul_ps(v1, id)));
  const int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qs), _mm512_cvtsepi32_epi8(i0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16), _mm512_cvtsepi32_epi8(i1));
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

// Elements 0..15 and 16..31 of a block as int32 codes (before offset / scale).
void store_block(__m512i q_lo, __m512i q_hi, float d, float* dst) {
  const __m512 vd = _mm512_set1_ps(d);
  _mm512_storeu_ps(dst, _mm512_mul_ps(_mm512_cvtepi32_ps(q_lo), vd));
  _mm512_storeu_ps(dst + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(q_hi), vd));
}
void store_block(__m512i q_lo, __m512i q_hi, float d, float m, float* dst) {
  const __m512 vd = _mm512_set1_ps(d), vm = _mm512_set1_ps(m);
  _mm512_storeu_ps(dst, _mm512_fmadd_ps(_mm512_cvtepi32_ps(q_lo), vd, vm));
  _mm512_storeu_ps(dst + 16, _mm512_fmadd_ps(_mm512_cvtepi32_ps(q_hi), vd, vm));
}

float f16(uint16_t h) {
  return _cvtsh_ss(h);
}

// Nibble codes of one block, elements 0..15 in lo and 16..31 in hi; Q5 adds 16 where qh has the
// bit.
void nibbles(const uint8_t* qs, __m512i& lo, __m512i& hi) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0f);
  lo = _mm512_cvtepu8_epi32(_mm_and_si128(x, mask));
  hi = _mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(x, 4), mask));
}
void nibbles_q5(const uint8_t* qs, const uint8_t* qh, __m512i& lo, __m512i& hi) {
  nibbles(qs, lo, hi);
  const uint32_t bits = load_qh(qh);
  const __m512i sixteen = _mm512_set1_epi32(16);
  lo = _mm512_mask_add_epi32(lo, static_cast<__mmask16>(bits), lo, sixteen);
  hi = _mm512_mask_add_epi32(hi, static_cast<__mmask16>(bits >> 16), hi, sixteen);
}

void dequantize_q4_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_0*>(src);
  const __m512i eight = _mm512_set1_epi32(8);
  for (int64_t i = 0; i < n / kQK; ++i) {
    __m512i lo, hi;
    nibbles(b[i].qs, lo, hi);
    store_block(_mm512_sub_epi32(lo, eight), _mm512_sub_epi32(hi, eight), f16(b[i].d),
                dst + i * kQK);
  }
}

void dequantize_q4_1(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    __m512i lo, hi;
    nibbles(b[i].qs, lo, hi);
    store_block(lo, hi, f16(b[i].d), f16(b[i].m), dst + i * kQK);
  }
}

void dequantize_q5_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_0*>(src);
  const __m512i sixteen = _mm512_set1_epi32(16);
  for (int64_t i = 0; i < n / kQK; ++i) {
    __m512i lo, hi;
    nibbles_q5(b[i].qs, b[i].qh, lo, hi);
    store_block(_mm512_sub_epi32(lo, sixteen), _mm512_sub_epi32(hi, sixteen), f16(b[i].d),
                dst + i * kQK);
  }
}

void dequantize_q5_1(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    __m512i lo, hi;
    nibbles_q5(b[i].qs, b[i].qh, lo, hi);
    store_block(lo, hi, f16(b[i].d), f16(b[i].m), dst + i * kQK);
  }
}

template <typename B>
void dequantize_q8(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const B*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m512i lo =
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i].qs)));
    const __m512i hi =
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i].qs + 16)));
    store_block(lo, hi, f16(b[i].d), dst + i * kQK);
  }
}

}  // namespace

void fill_legacy_avx512(KernelTable& table) {
  using Q4_1 = StepMin<BlockQ4_1, false>;
  using Q5_0 = StepOffset<BlockQ5_0, 16>;
  using Q5_1 = StepMin<BlockQ5_1, true>;
  using Q4_0 = MultiQuad<NibbleQuads<Q4_0Values>>;
  table[GgmlType::Q4_0] = {dequantize_q4_0, nullptr, vec_dot_of<Q4_0>, vec_dot_multi_of<Q4_0, 4>,
                           Q4_0::gemv};
  table[GgmlType::Q4_1] = {dequantize_q4_1, nullptr, vec_dot<Q4_1>,
                           vec_dot_multi_of<MultiDot<Q4_1>, 4>};
  table[GgmlType::Q5_0] = {dequantize_q5_0, nullptr, vec_dot<Q5_0>,
                           vec_dot_multi_of<MultiDot<Q5_0>, 4>};
  table[GgmlType::Q5_1] = {dequantize_q5_1, nullptr, vec_dot<Q5_1>,
                           vec_dot_multi_of<MultiDot<Q5_1>, 4>};
  using Q8_0 = MultiQuad<Q8_0Quads>;
  table[GgmlType::Q8_0] = {dequantize_q8<BlockQ8_0>, quantize_q8_0, vec_dot_of<Q8_0>,
                           vec_dot_multi_of<Q8_0, 4>, Q8_0::gemv};
  table[GgmlType::Q8_1] = {dequantize_q8<BlockQ8_1>, quantize_q8_1, nullptr};
}

}  // namespace strata::quant
