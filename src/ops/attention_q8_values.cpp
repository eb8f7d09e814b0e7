#include "ops/attention_q8_values.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "quant/blocks.h"
#include "util/fp16.h"

namespace strata::ops::q8_values {
namespace {

constexpr int64_t kQK = quant::kQK;
constexpr int64_t kMaxStride = 64;  // positions per chunk the kernels hold
constexpr float kLevels = 32767.0f;

using Block = quant::BlockQ8_0;

const Block* blocks_of(const uint8_t* const* rows, int64_t j, int64_t count) {
  return j < count ? reinterpret_cast<const Block*>(rows[j]) : nullptr;
}

inline uint32_t pair_of(int32_t low, int32_t high) {
  return static_cast<uint32_t>(static_cast<uint16_t>(low)) |
         static_cast<uint32_t>(static_cast<uint16_t>(high)) << 16;
}
inline int32_t low_half(uint32_t w) {
  return static_cast<int16_t>(w & 0xffffu);
}
inline int32_t high_half(uint32_t w) {
  return static_cast<int16_t>(w >> 16);
}

// round_half_even(x) saturated to int16, as vcvtps2dq then vpmovsdw give it (NaN: -32768).
inline int32_t round_to_int16(float x) {
  const float r = std::nearbyint(x);
  if (!(r > -32768.0f)) return -32768;
  return r >= 32767.0f ? 32767 : static_cast<int32_t>(r);
}

void value_scales_of(const uint8_t* const* rows, int64_t count, int64_t n_blocks, int64_t stride,
                     float* value_scales) {
  for (int64_t j = 0; j < stride; ++j) {
    const Block* row = blocks_of(rows, j, count);
    for (int64_t b = 0; b < n_blocks; ++b)
      value_scales[b * stride + j] = row ? f16_to_f32(row[b].d) : 0.0f;
  }
}

// ---- the loops ------------------------------------------------------------------------------

void pairs_portable(const uint8_t* const* rows, int64_t count, int64_t n_blocks, int64_t stride,
                    uint32_t* pairs, float* value_scales) {
  value_scales_of(rows, count, n_blocks, stride, value_scales);
  const int64_t d = n_blocks * kQK;
  for (int64_t p = 0; p < stride / 2; ++p) {
    const Block* even = blocks_of(rows, 2 * p, count);
    const Block* odd = blocks_of(rows, 2 * p + 1, count);
    for (int64_t b = 0; b < n_blocks; ++b) {
      for (int64_t i = 0; i < kQK; ++i) {
        pairs[p * d + b * kQK + i] = pair_of(even ? even[b].qs[i] : 0, odd ? odd[b].qs[i] : 0);
      }
    }
  }
}

void weights_portable(const float* weights, int64_t n_rows, int64_t begin, int64_t end,
                      const float* value_scales, int64_t n_blocks, int64_t stride, uint32_t* q,
                      float* q_scales) {
  const int64_t half = stride / 2;
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t b = 0; b < n_blocks; ++b) {
      float w[kMaxStride];
      float m = 0.0f;
      for (int64_t j = 0; j < stride; ++j) {
        w[j] =
            j >= begin && j < end ? weights[r * stride + j] * value_scales[b * stride + j] : 0.0f;
        m = std::max(m, std::fabs(w[j]));
      }
      const float inv = m > 0.0f ? kLevels / m : 0.0f;
      q_scales[r * n_blocks + b] = m / kLevels;
      uint32_t* qb = q + (r * n_blocks + b) * half;
      for (int64_t p = 0; p < half; ++p)
        qb[p] = pair_of(round_to_int16(w[2 * p] * inv), round_to_int16(w[2 * p + 1] * inv));
    }
  }
}

#define STRATA_Q8_VALUES_BODY(MADD)                                                        \
  const int64_t d = n_blocks * kQK, half = stride / 2;                                     \
  for (int64_t r = 0; r < n_rows; ++r) {                                                   \
    for (int64_t b = 0; b < n_blocks; ++b) {                                               \
      int32_t isum[kQK] = {};                                                              \
      const uint32_t* qb = q + (r * n_blocks + b) * half;                                  \
      for (int64_t p = first_pair; p < end_pair; ++p) {                                    \
        const int32_t low = low_half(qb[p]), high = high_half(qb[p]);                      \
        const uint32_t* c = pairs + p * d + b * kQK;                                       \
        for (int64_t i = 0; i < kQK; ++i)                                                  \
          isum[i] += low * low_half(c[i]) + high * high_half(c[i]);                        \
      }                                                                                    \
      const float s = q_scales[r * n_blocks + b];                                          \
      float* a = acc + r * d + b * kQK;                                                    \
      for (int64_t i = 0; i < kQK; ++i) a[i] = MADD(static_cast<float>(isum[i]), s, a[i]); \
    }                                                                                      \
  }

#define STRATA_FUSED(a, b, c) std::fma(a, b, c)
#define STRATA_PLAIN(a, b, c) ((a) * (b) + (c))

__attribute__((target("avx2,fma"), optimize("O3"))) void values_loop_avx2(
    const uint32_t* q, const float* q_scales, int64_t n_rows, const uint32_t* pairs,
    int64_t first_pair, int64_t end_pair, int64_t n_blocks, int64_t stride, float* acc) {
  STRATA_Q8_VALUES_BODY(STRATA_FUSED)
}
__attribute__((target("sse2"), optimize("O3"))) void values_loop_baseline(
    const uint32_t* q, const float* q_scales, int64_t n_rows, const uint32_t* pairs,
    int64_t first_pair, int64_t end_pair, int64_t n_blocks, int64_t stride, float* acc) {
  STRATA_Q8_VALUES_BODY(STRATA_PLAIN)
}

// ---- AVX2 ------------------------------------------------------------------------------------

// pairs_portable's layout: 16 dimensions of two positions widened to int16, paired by the
// in-lane unpacks and put back in order across the two lanes.
__attribute__((target("avx2"))) void pairs_avx2(const uint8_t* const* rows, int64_t count,
                                                int64_t n_blocks, int64_t stride, uint32_t* pairs,
                                                float* value_scales) {
  value_scales_of(rows, count, n_blocks, stride, value_scales);
  const int64_t d = n_blocks * kQK;
  const auto codes = [](const Block* row, int64_t b, int64_t h) {
    return row ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(row[b].qs + 16 * h))
               : _mm_setzero_si128();
  };
  for (int64_t p = 0; p < stride / 2; ++p) {
    const Block* even = blocks_of(rows, 2 * p, count);
    const Block* odd = blocks_of(rows, 2 * p + 1, count);
    for (int64_t b = 0; b < n_blocks; ++b) {
      for (int64_t h = 0; h < 2; ++h) {
        const __m256i e = _mm256_cvtepi8_epi16(codes(even, b, h));
        const __m256i o = _mm256_cvtepi8_epi16(codes(odd, b, h));
        const __m256i low = _mm256_unpacklo_epi16(e, o), high = _mm256_unpackhi_epi16(e, o);
        auto* out = reinterpret_cast<__m256i*>(pairs + p * d + b * kQK + 16 * h);
        _mm256_storeu_si256(out, _mm256_permute2x128_si256(low, high, 0x20));
        _mm256_storeu_si256(out + 1, _mm256_permute2x128_si256(low, high, 0x31));
      }
    }
  }
}

// weights_portable 8 positions at a time; stride a multiple of 16.
__attribute__((target("avx2"))) void weights_avx2(const float* weights, int64_t n_rows,
                                                  int64_t begin, int64_t end,
                                                  const float* value_scales, int64_t n_blocks,
                                                  int64_t stride, uint32_t* q, float* q_scales) {
  const int64_t half = stride / 2, n_vectors = stride / 8;
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 seen[kMaxStride / 8];
  for (int64_t v = 0; v < n_vectors; ++v) {
    const __m256i j = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(8 * v)),
                                       _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256i from = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(begin)), j);
    const __m256i to = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(end)), j);
    seen[v] = _mm256_castsi256_ps(_mm256_andnot_si256(from, to));
  }
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t b = 0; b < n_blocks; ++b) {
      __m256 w[kMaxStride / 8];
      __m256 m = _mm256_setzero_ps();
      for (int64_t v = 0; v < n_vectors; ++v) {
        // Unseen positions weigh 0 whatever their scale (an unwritten slot's may be NaN).
        w[v] = _mm256_and_ps(seen[v],
                             _mm256_mul_ps(_mm256_loadu_ps(weights + r * stride + 8 * v),
                                           _mm256_loadu_ps(value_scales + b * stride + 8 * v)));
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign, w[v]));
      }
      __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
      m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
      const float largest = std::max(_mm_cvtss_f32(m4), _mm_cvtss_f32(_mm_movehdup_ps(m4)));
      const __m256 inv = _mm256_set1_ps(largest > 0.0f ? kLevels / largest : 0.0f);
      q_scales[r * n_blocks + b] = largest / kLevels;
      auto* qb = reinterpret_cast<__m256i*>(q + (r * n_blocks + b) * half);
      for (int64_t v = 0; v < n_vectors; v += 2) {
        const __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(w[v], inv));
        const __m256i c = _mm256_cvtps_epi32(_mm256_mul_ps(w[v + 1], inv));
        _mm256_storeu_si256(qb + v / 2, _mm256_permute4x64_epi64(_mm256_packs_epi32(a, c), 0xd8));
      }
    }
  }
}

// Two rows x one block (4 vectors of 8 dimensions) at a time: vpmaddwd gives each dword's two
// products summed exactly, as vpdpwssd does.
template <int NR>
__attribute__((target("avx2,fma"))) void values_block_avx2(const uint32_t* q, const float* q_scales,
                                                           const uint32_t* pairs,
                                                           int64_t first_pair, int64_t end_pair,
                                                           int64_t n_blocks, int64_t half,
                                                           int64_t b, float* acc) {
  const int64_t d = n_blocks * kQK;
  __m256i s[NR][4];
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < 4; ++v) s[r][v] = _mm256_setzero_si256();
  for (int64_t p = first_pair; p < end_pair; ++p) {
    __m256i x[4];
    for (int v = 0; v < 4; ++v)
      x[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pairs + p * d + b * kQK + 8 * v));
    for (int r = 0; r < NR; ++r) {
      const __m256i w = _mm256_set1_epi32(static_cast<int>(q[(r * n_blocks + b) * half + p]));
      for (int v = 0; v < 4; ++v) s[r][v] = _mm256_add_epi32(s[r][v], _mm256_madd_epi16(x[v], w));
    }
  }
  for (int r = 0; r < NR; ++r) {
    const __m256 scale = _mm256_set1_ps(q_scales[r * n_blocks + b]);
    for (int v = 0; v < 4; ++v) {
      float* a = acc + r * d + b * kQK + 8 * v;
      _mm256_storeu_ps(a, _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[r][v]), scale, _mm256_loadu_ps(a)));
    }
  }
}

void values_avx2(const uint32_t* q, const float* q_scales, int64_t n_rows, const uint32_t* pairs,
                 int64_t first_pair, int64_t end_pair, int64_t n_blocks, int64_t stride,
                 float* acc) {
  const int64_t d = n_blocks * kQK, half = stride / 2;
  for (int64_t r0 = 0; r0 < n_rows; r0 += 2) {
    const auto block = n_rows - r0 >= 2 ? values_block_avx2<2> : values_block_avx2<1>;
    for (int64_t b = 0; b < n_blocks; ++b) {
      block(q + r0 * n_blocks * half, q_scales + r0 * n_blocks, pairs, first_pair, end_pair,
            n_blocks, half, b, acc + r0 * d);
    }
  }
}

// ---- AVX-512 ----------------------------------------------------------------------------------

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// Block b's 32 codes of a row as int16 (0 for no row).
__attribute__((target("avx512f,avx512bw"))) inline __m512i codes16(const Block* row, int64_t b) {
  return row ? _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row[b].qs)))
             : _mm512_setzero_si512();
}

// A block's 32 codes of two positions sign-extended to int16 and interleaved: the unpacks pair
// them within 128-bit lanes (dimensions 8k .. 8k + 3 in `low`, 8k + 4 .. 8k + 7 in `high`), the
// permutes put the dimensions back in order.
__attribute__((target("avx512f,avx512bw"))) void pairs_avx512(const uint8_t* const* rows,
                                                              int64_t count, int64_t n_blocks,
                                                              int64_t stride, uint32_t* pairs,
                                                              float* value_scales) {
  value_scales_of(rows, count, n_blocks, stride, value_scales);
  const int64_t d = n_blocks * kQK;
  const __m512i first = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
  const __m512i second = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  for (int64_t p = 0; p < stride / 2; ++p) {
    const Block* even = blocks_of(rows, 2 * p, count);
    const Block* odd = blocks_of(rows, 2 * p + 1, count);
    for (int64_t b = 0; b < n_blocks; ++b) {
      const __m512i e = codes16(even, b), o = codes16(odd, b);
      const __m512i low = _mm512_unpacklo_epi16(e, o), high = _mm512_unpackhi_epi16(e, o);
      uint32_t* out = pairs + p * d + b * kQK;
      _mm512_storeu_si512(out, _mm512_permutex2var_epi64(low, first, high));
      _mm512_storeu_si512(out + 16, _mm512_permutex2var_epi64(low, second, high));
    }
  }
}

// stride a multiple of 16.
__attribute__((target("avx512f,avx512bw"))) void weights_avx512(
    const float* weights, int64_t n_rows, int64_t begin, int64_t end, const float* value_scales,
    int64_t n_blocks, int64_t stride, uint32_t* q, float* q_scales) {
  const int64_t half = stride / 2, n_vectors = stride / 16;
  for (int64_t r = 0; r < n_rows; ++r) {
    __m512 p[kMaxStride / 16];
    __mmask16 seen[kMaxStride / 16];
    for (int64_t v = 0; v < n_vectors; ++v) {
      const int64_t lo = std::clamp<int64_t>(begin - 16 * v, 0, 16);
      const int64_t hi = std::clamp<int64_t>(end - 16 * v, 0, 16);
      seen[v] = static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1));
      p[v] = _mm512_maskz_loadu_ps(seen[v], weights + r * stride + 16 * v);
    }
    for (int64_t b = 0; b < n_blocks; ++b) {
      __m512 w[kMaxStride / 16];
      __m512 m = _mm512_setzero_ps();
      for (int64_t v = 0; v < n_vectors; ++v) {
        // Unseen positions weigh 0 whatever their scale (an unwritten slot's may be NaN).
        w[v] =
            _mm512_maskz_mul_ps(seen[v], p[v], _mm512_loadu_ps(value_scales + b * stride + 16 * v));
        m = _mm512_max_ps(m, _mm512_abs_ps(w[v]));
      }
      const float largest = _mm512_reduce_max_ps(m);
      const __m512 inv = _mm512_set1_ps(largest > 0.0f ? kLevels / largest : 0.0f);
      q_scales[r * n_blocks + b] = largest / kLevels;
      auto* qb = reinterpret_cast<int16_t*>(q + (r * n_blocks + b) * half);
      for (int64_t v = 0; v < n_vectors; ++v) {
        const __m256i rounded =
            _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(w[v], inv)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(qb + 16 * v), rounded);
      }
    }
  }
}

// NR rows x NV vectors of 16 dimensions from i0 (NV even: whole blocks): each pair of positions
// one load per vector and one int16 dot product per (row, vector), the weight pair broadcast.
template <int NR, int NV>
__attribute__((target("avx512f,avx512vnni"))) void values_block(
    const uint32_t* q, const float* q_scales, const uint32_t* pairs, int64_t first_pair,
    int64_t end_pair, int64_t n_blocks, int64_t half, int64_t i0, float* acc) {
  const int64_t d = n_blocks * kQK, b0 = i0 / kQK;
  __m512i s[NR][NV];
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < NV; ++v) s[r][v] = _mm512_setzero_si512();
  for (int64_t p = first_pair; p < end_pair; ++p) {
    __m512i x[NV];
    for (int v = 0; v < NV; ++v) x[v] = _mm512_loadu_si512(pairs + p * d + i0 + 16 * v);
    for (int r = 0; r < NR; ++r) {
      for (int v = 0; v < NV; ++v) {
        const __m512i w =
            _mm512_set1_epi32(static_cast<int>(q[(r * n_blocks + b0 + v / 2) * half + p]));
        s[r][v] = _mm512_dpwssd_epi32(s[r][v], x[v], w);
      }
    }
  }
  for (int r = 0; r < NR; ++r) {
    for (int v = 0; v < NV; ++v) {
      float* a = acc + r * d + i0 + 16 * v;
      const __m512 scale = _mm512_set1_ps(q_scales[r * n_blocks + b0 + v / 2]);
      _mm512_storeu_ps(a, _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[r][v]), scale, _mm512_loadu_ps(a)));
    }
  }
}

#pragma GCC diagnostic pop

using BlockFn = void (*)(const uint32_t*, const float*, const uint32_t*, int64_t, int64_t, int64_t,
                         int64_t, int64_t, float*);
template <int NR>
constexpr BlockFn kWidths[2] = {values_block<NR, 2>, values_block<NR, 4>};
constexpr const BlockFn* kRows[4] = {kWidths<1>, kWidths<2>, kWidths<3>, kWidths<4>};

void values_avx512(const uint32_t* q, const float* q_scales, int64_t n_rows, const uint32_t* pairs,
                   int64_t first_pair, int64_t end_pair, int64_t n_blocks, int64_t stride,
                   float* acc) {
  const int64_t d = n_blocks * kQK, half = stride / 2;
  for (int64_t r0 = 0; r0 < n_rows; r0 += 4) {
    const int64_t nr = std::min<int64_t>(4, n_rows - r0);
    for (int64_t i0 = 0; i0 < d; i0 += 64) {
      const int64_t nv = std::min<int64_t>(4, (d - i0) / 16);
      kRows[nr - 1][nv / 2 - 1](q + r0 * n_blocks * half, q_scales + r0 * n_blocks, pairs,
                                first_pair, end_pair, n_blocks, half, i0, acc + r0 * d);
    }
  }
}

}  // namespace

Kernels kernels_avx512() {
  return {pairs_avx512, weights_avx512, values_avx512};
}
Kernels kernels_avx2() {
  return {pairs_avx2, weights_avx2, values_avx2};
}
Kernels kernels_avx2_loops() {
  return {pairs_portable, weights_portable, values_loop_avx2};
}
Kernels kernels_baseline() {
  return {pairs_portable, weights_portable, values_loop_baseline};
}

}  // namespace strata::ops::q8_values
