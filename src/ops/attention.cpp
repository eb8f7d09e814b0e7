#include "ops/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <vector>

#include "ops/attention_q8.h"
#include "ops/attention_q8_values.h"
#include "ops/transpose_avx2.h"
#include "ops/transpose_avx512.h"
#include "ops/vector_exp.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "util/cpu_features.h"
#include "util/error.h"

namespace strata::ops {

void kv_store(const KvLayerView& kv, int64_t pos, const float* keys, const float* values) {
  const quant::QuantizeRowFn quantize = quant::traits(kv.type).kernels.quantize_row;
  for (int64_t h = 0; h < kv.n_kv_heads; ++h) {
    quantize(keys + h * kv.head_dim, kv.k_row(pos, h), kv.head_dim);
    quantize(values + h * kv.head_dim, kv.v_row(pos, h), kv.head_dim);
  }
}

namespace {

// Positions are scored a chunk at a time, chunks starting at position 0 whatever the page size
// or the other tokens of a block; the online softmax rescales once per chunk.
constexpr int64_t kChunk = 64;
// Softmax sums are kept in 16 lanes (position j of a chunk adds into lane j % 16) and added up in
// a fixed tree at the end, so the sum vectorizes and every path adds in the same order.
constexpr int64_t kLanes = kAttentionLanes;
constexpr int64_t kRowBlock = 4;  // query rows scored and accumulated together

// 64-byte aligned storage for the chunk buffers the kernels load whole vectors from.
template <typename T>
struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <typename U>
  Aligned64(const Aligned64<U>&) {}
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64}));
  }
  void deallocate(T* p, size_t) { ::operator delete (p, std::align_val_t{64}); }
  template <typename U>
  bool operator==(const Aligned64<U>&) const {
    return true;
  }
};
using AlignedFloats = std::vector<float, Aligned64<float>>;

int64_t round_up_lanes(int64_t n) {
  return (n + kLanes - 1) / kLanes * kLanes;
}

// Arithmetic shared by every path, whatever the instruction set or the blocking:
//   score(q, k_j) = scale * fma(q[d-1], k_j[d-1], ... fma(q[1], k_j[1], q[0] * k_j[0]))
//                   (F16 keys; Q8_0 keys are scored in integers, as attention_q8.h defines)
//   acc_i        = fma(p_j, v_j[i], acc_i) over the positions j of a chunk in order
//                   (F16 values; Q8_0 values are weighed in integers, attention_q8_values.h),
// one chain per (query, key) and per (query, dimension): a query row's result does not depend on
// which other rows are computed beside it. The portable kernels below fuse where the target has
// FMA (so they give what the AVX-512 kernels give) and multiply-add otherwise.
#define STRATA_SCORES_BODY(MADD)                                           \
  const int64_t n = n_vectors * kLanes;                                    \
  for (int64_t r = 0; r < n_rows; ++r) {                                   \
    float a[kChunk] = {};                                                  \
    const float* qr = q + r * d;                                           \
    for (int64_t i = 0; i < d; ++i) {                                      \
      const float qi = qr[i];                                              \
      const float* k = keys_t + i * kChunk;                                \
      for (int64_t l = 0; l < n; ++l) a[l] = MADD(qi, k[l], a[l]);         \
    }                                                                      \
    for (int64_t l = 0; l < n; ++l) scores[r * kChunk + l] = a[l] * scale; \
  }
#define STRATA_VALUES_BODY(MADD)                                    \
  for (int64_t r = 0; r < n_rows; ++r) {                            \
    for (int64_t i0 = 0; i0 < d; i0 += 64) {                        \
      const int64_t w = std::min<int64_t>(64, d - i0);              \
      float a[64];                                                  \
      float* acc_r = acc + r * d + i0;                              \
      for (int64_t i = 0; i < w; ++i) a[i] = acc_r[i];              \
      for (int64_t j = 0; j < count; ++j) {                         \
        const float p = weights[r * kChunk + j];                    \
        const float* v = values + j * d + i0;                       \
        for (int64_t i = 0; i < w; ++i) a[i] = MADD(p, v[i], a[i]); \
      }                                                             \
      for (int64_t i = 0; i < w; ++i) acc_r[i] = a[i];              \
    }                                                               \
  }

// exp(x) for the softmax weights (x <= 0 here): vector_exp.h's arithmetic, written as a loop
// that vectorizes (unlike calls to std::exp) for the portable kernels.
#define STRATA_EXP_BODY                                         \
  for (int64_t j = 0; j < count; ++j) {                         \
    const float x = std::max(values_in[j], -87.0f);             \
    const float n = std::nearbyint(x * 1.44269504f);            \
    const float r = x - n * 0.693145752f - n * 1.42860677e-06f; \
    float p = 1.38888889e-3f;                                   \
    p = p * r + 8.33333333e-3f;                                 \
    p = p * r + 4.16666667e-2f;                                 \
    p = p * r + 1.66666667e-1f;                                 \
    p = p * r + 0.5f;                                           \
    p = p * r + 1.0f;                                           \
    p = p * r + 1.0f;                                           \
    const int32_t bits = (static_cast<int32_t>(n) + 127) << 23; \
    float scale2;                                               \
    std::memcpy(&scale2, &bits, sizeof scale2);                 \
    values_out[j] = p * scale2;                                 \
  }

// One query row's online-softmax step over a chunk: scores[0, count) become the weights
// exp(score - new max), what was accumulated under the old maximum is rescaled, and the weights
// add into the lane sums. Lanes past `count` (up to the next multiple of 16) are padded with
// -inf for the maximum and 0 for the sums, which leaves both exactly as they were.
#define STRATA_SOFTMAX_BODY                                                                     \
  const int64_t padded = round_up_lanes(count);                                                 \
  for (int64_t j = count; j < padded; ++j) scores[j] = -std::numeric_limits<float>::infinity(); \
  float lane_max[kLanes];                                                                       \
  for (int64_t l = 0; l < kLanes; ++l) lane_max[l] = *running_max;                              \
  for (int64_t j0 = 0; j0 < padded; j0 += kLanes) {                                             \
    for (int64_t l = 0; l < kLanes; ++l)                                                        \
      lane_max[l] = lane_max[l] < scores[j0 + l] ? scores[j0 + l] : lane_max[l];                \
  }                                                                                             \
  float chunk_max = lane_max[0];                                                                \
  for (int64_t l = 1; l < kLanes; ++l) chunk_max = std::max(chunk_max, lane_max[l]);            \
  const float correction = std::exp(*running_max - chunk_max);                                  \
  if (correction != 1.0f) {                                                                     \
    for (int64_t i = 0; i < d; ++i) acc[i] *= correction;                                       \
    for (int64_t l = 0; l < kLanes; ++l) lane_sum[l] *= correction;                             \
  }                                                                                             \
  *running_max = chunk_max;                                                                     \
  {                                                                                             \
    const float* values_in = scores;                                                            \
    float* values_out = scores;                                                                 \
    for (int64_t j = 0; j < count; ++j) scores[j] -= chunk_max;                                 \
    STRATA_EXP_BODY                                                                             \
  }                                                                                             \
  for (int64_t j = count; j < padded; ++j) scores[j] = 0.0f;                                    \
  for (int64_t j0 = 0; j0 < padded; j0 += kLanes) {                                             \
    for (int64_t l = 0; l < kLanes; ++l) lane_sum[l] += scores[j0 + l];                         \
  }

#define STRATA_FUSED_MADD(a, b, c) std::fma(a, b, c)
#define STRATA_PLAIN_MADD(a, b, c) ((a) * (b) + (c))

#define STRATA_CHUNK_CLONES(suffix, isa, MADD)                                                    \
  __attribute__((target(isa), optimize("O3"))) void scores_loop_##suffix(                         \
      const float* q, int64_t n_rows, const float* keys_t, int64_t n_vectors, int64_t d,          \
      float scale, float* scores) {                                                               \
    STRATA_SCORES_BODY(MADD)                                                                      \
  }                                                                                               \
  __attribute__((target(isa), optimize("O3"))) void values_loop_##suffix(                         \
      const float* weights, int64_t n_rows, const float* values, int64_t count, int64_t d,        \
      float* acc) {                                                                               \
    STRATA_VALUES_BODY(MADD)                                                                      \
  }                                                                                               \
  __attribute__((target(isa), optimize("O3"))) void softmax_##suffix(                             \
      float* scores, int64_t count, float* running_max, float* lane_sum, float* acc, int64_t d) { \
    STRATA_SOFTMAX_BODY                                                                           \
  }

STRATA_CHUNK_CLONES(avx512, "avx512f,avx512bw,avx512vl,avx2,fma,prefer-vector-width=512",
                    STRATA_FUSED_MADD)
STRATA_CHUNK_CLONES(avx2, "avx2,fma", STRATA_FUSED_MADD)
STRATA_CHUNK_CLONES(baseline, "sse2", STRATA_PLAIN_MADD)

// keys_t[i][j] = rows[j][i] for j < count, 0 up to the next multiple of 16.
void transpose_keys_portable(const float* rows, int64_t count, int64_t d, float* keys_t) {
  const int64_t padded = round_up_lanes(count);
  for (int64_t i = 0; i < d; ++i) {
    for (int64_t j = 0; j < padded; ++j)
      keys_t[i * kChunk + j] = j < count ? rows[j * d + i] : 0.0f;
  }
}

// GCC 12's own avx512fintrin.h trips -Wmaybe-uninitialized (_mm512_undefined_*; GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// ---- AVX-512 kernels: the portable arithmetic with the rows and columns held in registers ----

// Scores of n_rows (NR) queries against 16 * NV keys: NR * NV accumulators, each dimension one
// broadcast per query and one load per 16 keys.
template <int NR, int NV>
__attribute__((target("avx512f"))) void scores_block_avx512(const float* q, const float* keys_t,
                                                            int64_t d, float scale, float* scores) {
  __m512 acc[NR][NV];
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t i = 0; i < d; ++i) {
    __m512 k[NV];
    for (int v = 0; v < NV; ++v) k[v] = _mm512_load_ps(keys_t + i * kChunk + v * kLanes);
    for (int r = 0; r < NR; ++r) {
      const __m512 qi = _mm512_set1_ps(q[r * d + i]);
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(qi, k[v], acc[r][v]);
    }
  }
  const __m512 s = _mm512_set1_ps(scale);
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < NV; ++v)
      _mm512_store_ps(scores + r * kChunk + v * kLanes, _mm512_mul_ps(acc[r][v], s));
}

// acc[r][i0 .. i0 + 16 NV) += sum_j weights[r][j] values[j][...] for n_rows (NR) rows.
template <int NR, int NV>
__attribute__((target("avx512f"))) void values_block_avx512(const float* weights,
                                                            const float* values, int64_t count,
                                                            int64_t d, int64_t i0, float* acc) {
  __m512 a[NR][NV];
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < NV; ++v) a[r][v] = _mm512_loadu_ps(acc + r * d + i0 + v * kLanes);
  for (int64_t j = 0; j < count; ++j) {
    __m512 x[NV];
    for (int v = 0; v < NV; ++v) x[v] = _mm512_load_ps(values + j * d + i0 + v * kLanes);
    for (int r = 0; r < NR; ++r) {
      const __m512 p = _mm512_set1_ps(weights[r * kChunk + j]);
      for (int v = 0; v < NV; ++v) a[r][v] = _mm512_fmadd_ps(p, x[v], a[r][v]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(acc + r * d + i0 + v * kLanes, a[r][v]);
}

// values_block_avx512 reading the F16 cache rows themselves: 16 values converted (exactly) where
// they are used, so the chunk is never written out as f32 rows.
template <int NR, int NV>
__attribute__((target("avx512f"))) void values_rows_block_avx512(const float* weights,
                                                                 const uint8_t* const* rows,
                                                                 int64_t count, int64_t d,
                                                                 int64_t i0, float* acc) {
  __m512 a[NR][NV];
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < NV; ++v) a[r][v] = _mm512_loadu_ps(acc + r * d + i0 + v * kLanes);
  for (int64_t j = 0; j < count; ++j) {
    __m512 x[NV];
    for (int v = 0; v < NV; ++v) {
      x[v] = _mm512_cvtph_ps(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[j] + 2 * (i0 + v * kLanes))));
    }
    for (int r = 0; r < NR; ++r) {
      const __m512 p = _mm512_set1_ps(weights[r * kChunk + j]);
      for (int v = 0; v < NV; ++v) a[r][v] = _mm512_fmadd_ps(p, x[v], a[r][v]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(acc + r * d + i0 + v * kLanes, a[r][v]);
}

using ValuesRowsBlockFn = void (*)(const float*, const uint8_t* const*, int64_t, int64_t, int64_t,
                                   float*);
template <int NR>
constexpr ValuesRowsBlockFn kValuesRowsRow[4] = {
    values_rows_block_avx512<NR, 1>, values_rows_block_avx512<NR, 2>,
    values_rows_block_avx512<NR, 3>, values_rows_block_avx512<NR, 4>};
constexpr const ValuesRowsBlockFn* kValuesRowsBlocks[4] = {kValuesRowsRow<1>, kValuesRowsRow<2>,
                                                           kValuesRowsRow<3>, kValuesRowsRow<4>};

// d a multiple of 16; n_rows <= kRowBlock; F16 rows.
void values_rows_avx512(const float* weights, int64_t n_rows, const uint8_t* const* rows,
                        int64_t count, int64_t d, float* acc) {
  for (int64_t i0 = 0; i0 < d; i0 += 64) {
    const int64_t nv = std::min<int64_t>(4, (d - i0) / kLanes);
    kValuesRowsBlocks[n_rows - 1][nv - 1](weights, rows, count, d, i0, acc);
  }
}

using ScoresBlockFn = void (*)(const float*, const float*, int64_t, float, float*);
using ValuesBlockFn = void (*)(const float*, const float*, int64_t, int64_t, int64_t, float*);

template <int NR>
constexpr ScoresBlockFn kScoresRow[4] = {scores_block_avx512<NR, 1>, scores_block_avx512<NR, 2>,
                                         scores_block_avx512<NR, 3>, scores_block_avx512<NR, 4>};
constexpr const ScoresBlockFn* kScoresBlocks[4] = {kScoresRow<1>, kScoresRow<2>, kScoresRow<3>,
                                                   kScoresRow<4>};
template <int NR>
constexpr ValuesBlockFn kValuesRow[4] = {values_block_avx512<NR, 1>, values_block_avx512<NR, 2>,
                                         values_block_avx512<NR, 3>, values_block_avx512<NR, 4>};
constexpr const ValuesBlockFn* kValuesBlocks[4] = {kValuesRow<1>, kValuesRow<2>, kValuesRow<3>,
                                                   kValuesRow<4>};

// d a multiple of 16; n_rows <= kRowBlock.
void scores_avx512(const float* q, int64_t n_rows, const float* keys_t, int64_t n_vectors,
                   int64_t d, float scale, float* scores) {
  kScoresBlocks[n_rows - 1][n_vectors - 1](q, keys_t, d, scale, scores);
}
void values_avx512_blocks(const float* weights, int64_t n_rows, const float* values, int64_t count,
                          int64_t d, float* acc) {
  for (int64_t i0 = 0; i0 < d; i0 += 64) {
    const int64_t nv = std::min<int64_t>(4, (d - i0) / kLanes);
    kValuesBlocks[n_rows - 1][nv - 1](weights, values, count, d, i0, acc);
  }
}

// STRATA_SOFTMAX_BODY in registers for NR rows (row r's scores at scores + r * kChunk, its
// maximum at running_max[r], its lane sums at lane_sum + r * kLanes, its accumulator at
// acc + r * d), the correction factor from the same polynomial. Step by step across the rows: each
// row's arithmetic is its own, and the rows' independent chains (the maximum's reduction, the
// exponentials) overlap.
template <int NR>
__attribute__((target("avx512f"))) void softmax_block_avx512(float* scores, int64_t count,
                                                             float* running_max, float* lane_sum,
                                                             float* acc, int64_t d) {
  const int64_t n_vectors = round_up_lanes(count) / kLanes;
  const __mmask16 last = static_cast<__mmask16>(0xffffu >> (n_vectors * kLanes - count));
  const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 s[NR][4];
  float chunk_max[NR];
  for (int r = 0; r < NR; ++r) {
    __m512 m = _mm512_set1_ps(running_max[r]);
    for (int64_t v = 0; v < n_vectors; ++v) {
      s[r][v] = _mm512_load_ps(scores + r * kChunk + v * kLanes);
      if (v == n_vectors - 1) s[r][v] = _mm512_mask_mov_ps(minus_inf, last, s[r][v]);
      m = _mm512_max_ps(m, s[r][v]);
    }
    chunk_max[r] = _mm512_reduce_max_ps(m);
  }
  for (int r = 0; r < NR; ++r) {
    __m512 sum = _mm512_loadu_ps(lane_sum + r * kLanes);
    // An unchanged maximum has the correction exp(0), exactly 1: most chunks skip computing it.
    if (chunk_max[r] != running_max[r]) {
      const __m512 correction = exp_avx512(_mm512_set1_ps(running_max[r] - chunk_max[r]));
      if (_mm512_cvtss_f32(correction) != 1.0f) {
        for (int64_t i = 0; i < d; i += kLanes)
          _mm512_storeu_ps(acc + r * d + i,
                           _mm512_mul_ps(_mm512_loadu_ps(acc + r * d + i), correction));
        sum = _mm512_mul_ps(sum, correction);
      }
    }
    running_max[r] = chunk_max[r];
    const __m512 mx = _mm512_set1_ps(chunk_max[r]);
    for (int64_t v = 0; v < n_vectors; ++v) {
      __m512 w = exp_avx512(_mm512_sub_ps(s[r][v], mx));
      if (v == n_vectors - 1) w = _mm512_maskz_mov_ps(last, w);
      _mm512_store_ps(scores + r * kChunk + v * kLanes, w);
      sum = _mm512_add_ps(sum, w);
    }
    _mm512_storeu_ps(lane_sum + r * kLanes, sum);
  }
}
using SoftmaxBlockFn = void (*)(float*, int64_t, float*, float*, float*, int64_t);
constexpr SoftmaxBlockFn kSoftmaxBlocks[4] = {softmax_block_avx512<1>, softmax_block_avx512<2>,
                                              softmax_block_avx512<3>, softmax_block_avx512<4>};
// n_rows <= kRowBlock.
void softmax_rows_avx512(float* scores, int64_t n_rows, int64_t count, float* running_max,
                         float* lane_sum, float* acc, int64_t d) {
  kSoftmaxBlocks[n_rows - 1](scores, count, running_max, lane_sum, acc, d);
}

// keys_t[i][j] = key j's dimension i for j < count (F16 rows at rows[j]), 0 up to the next
// multiple of 16; d a multiple of 16.
__attribute__((target("avx512f"))) void f16_keys_t_avx512(const uint8_t* const* rows, int64_t count,
                                                          int64_t d, float* keys_t) {
  for (int64_t j0 = 0; j0 < count; j0 += kLanes) {
    const int64_t n = std::min(kLanes, count - j0);
    for (int64_t i0 = 0; i0 < d; i0 += kLanes) {
      __m512 r[16];
      for (int m = 0; m < 16; ++m) {
        r[m] = m < n ? _mm512_cvtph_ps(_mm256_loadu_si256(
                           reinterpret_cast<const __m256i*>(rows[j0 + m] + 2 * i0)))
                     : _mm512_setzero_ps();
      }
      transpose16x16(r);
      for (int m = 0; m < 16; ++m) _mm512_store_ps(keys_t + (i0 + m) * kChunk + j0, r[m]);
    }
  }
}
// The same from f32 rows (row j at rows + j * d).
__attribute__((target("avx512f"))) void f32_keys_t_avx512(const float* rows, int64_t count,
                                                          int64_t d, float* keys_t) {
  for (int64_t j0 = 0; j0 < count; j0 += kLanes) {
    const int64_t n = std::min(kLanes, count - j0);
    for (int64_t i0 = 0; i0 < d; i0 += kLanes) {
      __m512 r[16];
      for (int m = 0; m < 16; ++m)
        r[m] = m < n ? _mm512_loadu_ps(rows + (j0 + m) * d + i0) : _mm512_setzero_ps();
      transpose16x16(r);
      for (int m = 0; m < 16; ++m) _mm512_store_ps(keys_t + (i0 + m) * kChunk + j0, r[m]);
    }
  }
}

// An F16 row of d values (a multiple of the vector width) to f32.
__attribute__((target("avx512f"))) void f16_row_avx512(const uint8_t* src, int64_t d, float* out) {
  for (int64_t i = 0; i < d; i += 16) {
    _mm512_storeu_ps(
        out + i,
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * i))));
  }
}
__attribute__((target("avx2,f16c"))) void f16_row_avx2(const uint8_t* src, int64_t d, float* out) {
  for (int64_t i = 0; i < d; i += 8) {
    _mm256_storeu_ps(
        out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i))));
  }
}

// ---- AVX2 kernels: the same arithmetic as the loops, rows and columns held in registers ----

// STRATA_SOFTMAX_BODY on two vectors of 8 lanes (the 16 lanes of the sums), the loop's bits: the
// maxima and sums lane by lane in the same order, the correction from the same std::exp.
__attribute__((target("avx2,fma"))) void softmax_avx2_row(float* scores, int64_t count,
                                                          float* running_max, float* lane_sum,
                                                          float* acc, int64_t d) {
  const int64_t padded = round_up_lanes(count);
  const __m256 minus_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256 m[2] = {_mm256_set1_ps(*running_max), _mm256_set1_ps(*running_max)};
  for (int64_t j = 0; j < padded; j += 8) {
    const __m256 live = _mm256_castsi256_ps(
        _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count - j)), lane));
    const __m256 s = _mm256_blendv_ps(minus_inf, _mm256_loadu_ps(scores + j), live);
    m[(j / 8) % 2] = _mm256_max_ps(s, m[(j / 8) % 2]);
  }
  alignas(32) float lane_max[kLanes];
  _mm256_store_ps(lane_max, m[0]);
  _mm256_store_ps(lane_max + 8, m[1]);
  float chunk_max = lane_max[0];
  for (int64_t l = 1; l < kLanes; ++l) chunk_max = std::max(chunk_max, lane_max[l]);
  // An unchanged maximum has the correction exp(0), exactly 1: most chunks skip computing it.
  const float correction = chunk_max == *running_max ? 1.0f : std::exp(*running_max - chunk_max);
  __m256 sum[2] = {_mm256_loadu_ps(lane_sum), _mm256_loadu_ps(lane_sum + 8)};
  if (correction != 1.0f) {
    const __m256 c = _mm256_set1_ps(correction);
    int64_t i = 0;
    for (; i + 8 <= d; i += 8)
      _mm256_storeu_ps(acc + i, _mm256_mul_ps(_mm256_loadu_ps(acc + i), c));
    for (; i < d; ++i) acc[i] *= correction;
    sum[0] = _mm256_mul_ps(sum[0], c);
    sum[1] = _mm256_mul_ps(sum[1], c);
  }
  *running_max = chunk_max;
  const __m256 mx = _mm256_set1_ps(chunk_max);
  for (int64_t j = 0; j < padded; j += 8) {
    const __m256 live = _mm256_castsi256_ps(
        _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count - j)), lane));
    const __m256 w = _mm256_and_ps(live, exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(scores + j), mx)));
    _mm256_storeu_ps(scores + j, w);
    sum[(j / 8) % 2] = _mm256_add_ps(sum[(j / 8) % 2], w);
  }
  _mm256_storeu_ps(lane_sum, sum[0]);
  _mm256_storeu_ps(lane_sum + 8, sum[1]);
}

// Scores of NR queries against 8 * NV keys (see scores_block_avx512).
template <int NR, int NV>
__attribute__((target("avx2,fma"))) void scores_block_avx2(const float* q, const float* keys_t,
                                                           int64_t d, float scale, float* scores) {
  __m256 acc[NR][NV];
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_setzero_ps();
  for (int64_t i = 0; i < d; ++i) {
    __m256 k[NV];
    for (int v = 0; v < NV; ++v) k[v] = _mm256_load_ps(keys_t + i * kChunk + v * 8);
    for (int r = 0; r < NR; ++r) {
      const __m256 qi = _mm256_set1_ps(q[r * d + i]);
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_fmadd_ps(qi, k[v], acc[r][v]);
    }
  }
  const __m256 s = _mm256_set1_ps(scale);
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < NV; ++v)
      _mm256_store_ps(scores + r * kChunk + v * 8, _mm256_mul_ps(acc[r][v], s));
}

// acc[r][i0 .. i0 + 8 NV) += sum_j weights[r][j] values[j][...] (see values_block_avx512).
template <int NR, int NV>
__attribute__((target("avx2,fma"))) void values_block_avx2(const float* weights,
                                                           const float* values, int64_t count,
                                                           int64_t d, int64_t i0, float* acc) {
  __m256 a[NR][NV];
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < NV; ++v) a[r][v] = _mm256_loadu_ps(acc + r * d + i0 + v * 8);
  for (int64_t j = 0; j < count; ++j) {
    __m256 x[NV];
    for (int v = 0; v < NV; ++v) x[v] = _mm256_loadu_ps(values + j * d + i0 + v * 8);
    for (int r = 0; r < NR; ++r) {
      const __m256 p = _mm256_set1_ps(weights[r * kChunk + j]);
      for (int v = 0; v < NV; ++v) a[r][v] = _mm256_fmadd_ps(p, x[v], a[r][v]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < NV; ++v) _mm256_storeu_ps(acc + r * d + i0 + v * 8, a[r][v]);
}

template <int NR>
constexpr ScoresBlockFn kScoresRowAvx2[2] = {scores_block_avx2<NR, 1>, scores_block_avx2<NR, 2>};
constexpr const ScoresBlockFn* kScoresBlocksAvx2[4] = {kScoresRowAvx2<1>, kScoresRowAvx2<2>,
                                                       kScoresRowAvx2<3>, kScoresRowAvx2<4>};
template <int NR>
constexpr ValuesBlockFn kValuesRowAvx2[2] = {values_block_avx2<NR, 1>, values_block_avx2<NR, 2>};
constexpr const ValuesBlockFn* kValuesBlocksAvx2[4] = {kValuesRowAvx2<1>, kValuesRowAvx2<2>,
                                                       kValuesRowAvx2<3>, kValuesRowAvx2<4>};

// Two vectors of 8 keys (8 accumulators for 4 rows) at a time; d a multiple of 8.
void scores_avx2(const float* q, int64_t n_rows, const float* keys_t, int64_t n_vectors, int64_t d,
                 float scale, float* scores) {
  const int64_t n8 = n_vectors * (kLanes / 8);
  for (int64_t v0 = 0; v0 < n8; v0 += 2) {
    kScoresBlocksAvx2[n_rows - 1][std::min<int64_t>(2, n8 - v0) - 1](q, keys_t + v0 * 8, d, scale,
                                                                     scores + v0 * 8);
  }
}
void values_avx2_blocks(const float* weights, int64_t n_rows, const float* values, int64_t count,
                        int64_t d, float* acc) {
  for (int64_t i0 = 0; i0 < d; i0 += 16) {
    kValuesBlocksAvx2[n_rows - 1][std::min<int64_t>(2, (d - i0) / 8) - 1](weights, values, count, d,
                                                                          i0, acc);
  }
}

// keys_t[i][j] = rows[j][i] (f32 rows, d a multiple of 8) for j < count, 0 up to the next multiple
// of 16: 8 x 8 tiles transposed in registers.
__attribute__((target("avx2"))) void f32_keys_t_avx2(const float* rows, int64_t count, int64_t d,
                                                     float* keys_t) {
  const int64_t padded = round_up_lanes(count);
  for (int64_t j0 = 0; j0 < padded; j0 += 8) {
    const int64_t n = std::clamp<int64_t>(count - j0, 0, 8);
    for (int64_t i0 = 0; i0 < d; i0 += 8) {
      __m256 r[8];
      for (int m = 0; m < 8; ++m)
        r[m] = m < n ? _mm256_loadu_ps(rows + (j0 + m) * d + i0) : _mm256_setzero_ps();
      transpose8x8(r);
      for (int m = 0; m < 8; ++m) _mm256_store_ps(keys_t + (i0 + m) * kChunk + j0, r[m]);
    }
  }
}

#pragma GCC diagnostic pop

struct ChunkKernels {
  void (*scores)(const float*, int64_t, const float*, int64_t, int64_t, float, float*);
  void (*values)(const float*, int64_t, const float*, int64_t, int64_t, float*);
  void (*softmax)(float*, int64_t, float*, float*, float*, int64_t);
  void (*f16_keys_t)(const uint8_t* const*, int64_t, int64_t, float*);  // null: via f32 rows
  void (*f32_keys_t)(const float*, int64_t, int64_t, float*);
  void (*f16_row)(const uint8_t*, int64_t, float*);  // null: the type's dequantize_row
  // Scores over Q8_0 keys in integers (attention_q8.h): every level has them.
  q8_scores::Kernels q8{};
  // Values over a Q8_0 cache in integers (attention_q8_values.h): every level has them.
  q8_values::Kernels q8v{};
  // Values read from the F16 cache rows as they are; null: from rows decoded to f32.
  void (*values_rows)(const float*, int64_t, const uint8_t* const*, int64_t, int64_t,
                      float*) = nullptr;
  // softmax for a block of rows at once (null: row by row).
  void (*softmax_rows)(float*, int64_t, int64_t, float*, float*, float*, int64_t) = nullptr;
};

std::atomic<AttentionPath> attention_path{AttentionPath::automatic};

// The kernels for head size d: the register-blocked AVX-512 ones where d is a multiple of 16 (AVX2:
// of 8), else the loops for the best instruction set (same arithmetic either way).
const ChunkKernels& chunk_kernels(int64_t d) {
  static const CpuFeatures& cpu = cpu_features();
  static const ChunkKernels avx512{scores_avx512,
                                   values_avx512_blocks,
                                   softmax_block_avx512<1>,
                                   f16_keys_t_avx512,
                                   f32_keys_t_avx512,
                                   f16_row_avx512,
                                   q8_scores::kernels_avx512(),
                                   q8_values::kernels_avx512(),
                                   values_rows_avx512,
                                   softmax_rows_avx512};
  static const ChunkKernels avx512_loops{scores_loop_avx512,
                                         values_loop_avx512,
                                         softmax_avx512,
                                         nullptr,
                                         transpose_keys_portable,
                                         nullptr,
                                         q8_scores::kernels_avx512(),
                                         q8_values::kernels_avx512()};
  static const ChunkKernels avx2{
      scores_avx2,     values_avx2_blocks, softmax_avx2_row,          nullptr,
      f32_keys_t_avx2, f16_row_avx2,       q8_scores::kernels_avx2(), q8_values::kernels_avx2()};
  static const ChunkKernels avx2_loops{scores_loop_avx2,
                                       values_loop_avx2,
                                       softmax_avx2,
                                       nullptr,
                                       transpose_keys_portable,
                                       f16_row_avx2,
                                       q8_scores::kernels_avx2_loops(),
                                       q8_values::kernels_avx2_loops()};
  static const ChunkKernels avx2_odd{scores_loop_avx2,
                                     values_loop_avx2,
                                     softmax_avx2,
                                     nullptr,
                                     transpose_keys_portable,
                                     nullptr,
                                     q8_scores::kernels_avx2(),
                                     q8_values::kernels_avx2()};
  static const ChunkKernels baseline{scores_loop_baseline,
                                     values_loop_baseline,
                                     softmax_baseline,
                                     nullptr,
                                     transpose_keys_portable,
                                     nullptr,
                                     q8_scores::kernels_baseline(),
                                     q8_values::kernels_baseline()};
  switch (attention_path.load(std::memory_order_relaxed)) {
    case AttentionPath::automatic:
      break;
    case AttentionPath::avx512:
      STRATA_CHECK(cpu.has_avx512_level(), "this CPU has no AVX-512 (with VNNI)");
      return d % 16 == 0 ? avx512 : avx512_loops;
    case AttentionPath::avx2:
      STRATA_CHECK(cpu.has_avx2_level(), "this CPU has no AVX2 and FMA");
      return d % 8 == 0 ? avx2 : avx2_odd;
    case AttentionPath::avx2_loops:
      STRATA_CHECK(cpu.has_avx2_level(), "this CPU has no AVX2 and FMA");
      return d % 8 == 0 ? avx2_loops : avx2_odd;
    case AttentionPath::baseline:
      return baseline;
  }
  if (cpu.has_avx512_level()) return d % 16 == 0 ? avx512 : avx512_loops;
  if (cpu.has_avx2_level()) return d % 8 == 0 ? avx2 : avx2_odd;
  return baseline;
}

// Per-thread buffers for one chunk, reused across calls.
struct Workspace {
  AlignedFloats keys_t;               // [d][kChunk]
  AlignedFloats values;               // [kChunk][d]
  AlignedFloats rows;                 // [kChunk][d] keys decoded row by row
  AlignedFloats queries;              // [n_rows][d]
  const uint8_t* value_rows[kChunk];  // the chunk's cache rows of values
  // Q8_0 keys scored in integers: the chunk's keys and scales (attention_q8.h), the query rows.
  std::vector<uint32_t, Aligned64<uint32_t>> q8_keys;  // [d / 4][kChunk]
  AlignedFloats q8_key_scales;                         // [d / 32][kChunk]
  std::vector<uint32_t> q8_query_dwords;               // [n_rows][d / 4]
  std::vector<float> q8_query_scales;                  // [n_rows][d / 32]
  std::vector<int32_t> q8_query_offsets;               // [n_rows][d / 32]
  // Q8_0 values in integers (attention_q8_values.h): the chunk's code pairs and scales, a row
  // block's weights.
  std::vector<uint32_t, Aligned64<uint32_t>> q8_value_pairs;  // [kChunk / 2][d]
  AlignedFloats q8_value_scales;                              // [d / 32][kChunk]
  std::vector<uint32_t> q8_weights;                           // [kRowBlock][d / 32][kChunk / 2]
  std::vector<float> q8_weight_scales;                        // [kRowBlock][d / 32]
};

// The key and value rows of positions [p0, p0 + count) of kv_head, run by run, a run being
// positions in consecutive slots (one page).
void chunk_rows(const KvLayerView& kv, int64_t kv_head, int64_t p0, int64_t count,
                const uint8_t** k_rows, const uint8_t** v_rows) {
  const int64_t stride = kv.n_kv_heads * kv.head_row_bytes;  // next slot, same head
  for (int64_t j0 = 0; j0 < count;) {
    const int64_t run = std::min(count - j0, kv.contiguous_from(p0 + j0));
    const uint8_t* kr = kv.k_row(p0 + j0, kv_head);
    const uint8_t* vr = kv.v_row(p0 + j0, kv_head);
    for (int64_t j = 0; j < run; ++j) {
      k_rows[j0 + j] = kr + j * stride;
      v_rows[j0 + j] = vr + j * stride;
    }
    j0 += run;
  }
}

// Whether the values kernel reads the cache rows as they are (else decode_chunk decodes them):
// for one token's rows; the rows of several tokens would convert every value again for each block
// of rows, where decoding the chunk once costs one conversion.
bool values_from_rows(const KvLayerView& kv, const ChunkKernels& k, int64_t n_tokens) {
  return k.values_rows && kv.type == GgmlType::F16 && kv.head_dim % kLanes == 0 && n_tokens == 1;
}

// Decodes positions [p0, p0 + count) of kv_head: keys transposed into keys_t, values as rows
// (raw_values: left in the cache, the values kernel reads ws.value_rows); a Q8_0 chunk's keys and
// values laid out for the integer kernels instead.
// Meanwhile it asks for the rows of next_head at [next_p0, next_p0 + next_count), what is decoded
// next, spread over the decoding so they arrive while this chunk is computed: a long-context
// decode step streams the cache from memory, and one burst of prefetches would stall on the miss
// buffers instead. They go to L2: the chunk being computed and its buffers fill most of L1, and
// rows prefetched into L1 evicted them (a Q8_0 decode from RAM took 1.3x as long).
void decode_chunk(const KvLayerView& kv, int64_t kv_head, int64_t p0, int64_t count,
                  int64_t next_head, int64_t next_p0, int64_t next_count, bool raw_values,
                  const ChunkKernels& k, Workspace& ws) {
  const int64_t d = kv.head_dim;
  const uint8_t* k_rows[kChunk];
  const uint8_t** v_rows = ws.value_rows;
  chunk_rows(kv, kv_head, p0, count, k_rows, v_rows);
  const uint8_t* next_k[kChunk];
  const uint8_t* next_v[kChunk];
  chunk_rows(kv, next_head, next_p0, next_count, next_k, next_v);
  const bool f16 = kv.type == GgmlType::F16 && k.f16_row;
  const bool q8 = kv.type == GgmlType::Q8_0;
  const quant::DequantizeRowFn dequantize = quant::traits(kv.type).kernels.dequantize_row;
  float* values = ws.values.data();
  for (int64_t j = 0; j < std::max(count, next_count); ++j) {
    if (j < next_count) {
      for (int64_t b = 0; b < kv.head_row_bytes; b += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(next_k[j] + b), _MM_HINT_T1);
        _mm_prefetch(reinterpret_cast<const char*>(next_v[j] + b), _MM_HINT_T1);
      }
    }
    if (j >= count || raw_values || q8) continue;
    if (f16) {
      k.f16_row(v_rows[j], d, values + j * d);
    } else {
      dequantize(v_rows[j], values + j * d, d);
    }
  }
  if (kv.type == GgmlType::F16 && k.f16_keys_t) {
    k.f16_keys_t(k_rows, count, d, ws.keys_t.data());
    return;
  }
  if (q8) {  // scored and weighed in integers (a Q8_0 row is whole blocks)
    k.q8.keys(k_rows, count, d / quant::kQK, kChunk, ws.q8_keys.data(), ws.q8_key_scales.data());
    k.q8v.pairs(v_rows, count, d / quant::kQK, kChunk, ws.q8_value_pairs.data(),
                ws.q8_value_scales.data());
    return;
  }
  float* rows = ws.rows.data();
  for (int64_t j = 0; j < count; ++j) {
    if (f16) {
      k.f16_row(k_rows[j], d, rows + j * d);
    } else {
      dequantize(k_rows[j], rows + j * d, d);
    }
  }
  k.f32_keys_t(rows, count, d, ws.keys_t.data());
}

}  // namespace

void set_attention_path(AttentionPath path) {
  attention_path.store(path, std::memory_order_relaxed);
}

void attend_range(const KvLayerView& kv, int64_t first_head, int64_t n_heads, const float* q,
                  int64_t q_stride, int64_t n_group, int64_t n_tokens, const int64_t* n_positions,
                  float scale, int64_t range, const AttendOptions& options,
                  const AttentionPartial& partial) {
  const int64_t d = kv.head_dim;
  STRATA_CHECK(d >= 1 && d <= kMaxHeadDim, "head size {} outside [1, {}]", d, kMaxHeadDim);
  STRATA_CHECK(n_group >= 1 && n_group <= kMaxGroup, "{} query heads per KV head exceeds {}",
               n_group, kMaxGroup);
  STRATA_CHECK(n_heads >= 1 && first_head >= 0 && first_head + n_heads <= kv.n_kv_heads,
               "KV heads [{}, {}) outside the cache's {}", first_head, first_head + n_heads,
               kv.n_kv_heads);
  STRATA_CHECK(!kv.pages || kv.page_size > 0, "paged KV view without a page size");
  const int64_t head_rows = n_heads * n_group;  // a token's rows: head by head, its group within
  const int64_t n_rows = n_tokens * head_rows;
  thread_local Workspace ws;
  ws.keys_t.resize(static_cast<size_t>(d * kChunk));
  ws.values.resize(static_cast<size_t>(kChunk * d));
  ws.rows.resize(static_cast<size_t>(kChunk * d));
  const bool q8_cache = kv.type == GgmlType::Q8_0;
  STRATA_CHECK(!q8_cache || d % quant::kQK == 0, "a Q8_0 cache needs head sizes in blocks of {}",
               quant::kQK);
  const int64_t n_blocks = d / quant::kQK;
  if (q8_cache) {
    ws.q8_keys.resize(static_cast<size_t>(d / 4 * kChunk));
    ws.q8_value_pairs.resize(static_cast<size_t>(kChunk / 2 * d));
    ws.q8_value_scales.resize(static_cast<size_t>(n_blocks * kChunk));
    ws.q8_weights.resize(static_cast<size_t>(kRowBlock * n_blocks * kChunk / 2));
    ws.q8_weight_scales.resize(static_cast<size_t>(kRowBlock * n_blocks));
    ws.q8_key_scales.resize(static_cast<size_t>(n_blocks * kChunk));
    ws.q8_query_dwords.resize(static_cast<size_t>(n_rows * d / 4));
    ws.q8_query_scales.resize(static_cast<size_t>(n_rows * n_blocks));
    ws.q8_query_offsets.resize(static_cast<size_t>(n_rows * n_blocks));
  } else {
    ws.queries.resize(static_cast<size_t>(n_rows * d));
  }
  clear_partial(partial, n_rows, d);

  // Queries meet the keys rounded to the keys' partner format (F16 for F16 keys, Q8_0 for
  // Q8_0), as other GGUF engines compute Q.K: F16 keys on f32 copies, Q8_0 keys in integers
  // (attention_q8.h); values on f32 copies, Q8_0 values in integers (attention_q8_values.h). A
  // chunk's keys and values are decoded once for the whole block of query rows.
  const quant::TypeTraits& qt = quant::traits(quant::traits(kv.type).activation_type);
  alignas(64) uint8_t packed[kMaxHeadDim * 2];
  const int64_t range_begin = range * kAttentionRange, range_end = range_begin + kAttentionRange;
  const auto first_of = [&](int64_t t) {
    return options.first_position ? options.first_position[t] : int64_t{0};
  };
  // Token t's positions in this range: [begin_of(t), end_of(t)), empty when it has none here.
  const auto begin_of = [&](int64_t t) { return std::max(first_of(t), range_begin); };
  const auto end_of = [&](int64_t t) { return std::min(n_positions[t], range_end); };
  int64_t chunks_end = range_begin, chunks_begin = range_end, max_positions = 0;
  for (int64_t t = 0; t < n_tokens; ++t) {
    max_positions = std::max(max_positions, n_positions[t]);
    STRATA_CHECK(first_of(t) >= 0 && first_of(t) < n_positions[t],
                 "attention window [{}, {}) of token {} is empty", first_of(t), n_positions[t], t);
    if (begin_of(t) >= end_of(t)) continue;
    chunks_end = std::max(chunks_end, end_of(t));
    chunks_begin = std::min(chunks_begin, begin_of(t));
    for (int64_t hg = 0; hg < head_rows; ++hg) {
      qt.kernels.quantize_row(q + t * q_stride + hg * d, packed, d);
      const int64_t row = t * head_rows + hg;
      if (q8_cache) {
        q8_scores::prepare_query(packed, n_blocks, ws.q8_query_dwords.data() + row * d / 4,
                                 ws.q8_query_scales.data() + row * n_blocks,
                                 ws.q8_query_offsets.data() + row * n_blocks);
      } else {
        qt.kernels.dequantize_row(packed, ws.queries.data() + row * d, d);
      }
    }
  }

  const ChunkKernels& k = chunk_kernels(d);
  const bool raw_values = values_from_rows(kv, k, n_tokens);
  alignas(64) float scores[kRowBlock * kChunk];
  // Chunks stay aligned to multiples of kChunk (a window only skips whole chunks and masks the
  // head of one), so a token's arithmetic is the same whichever tokens share its block. Within a
  // chunk the heads take turns, so a step reads whole cache slots (every head's row of a
  // position) rather than one head's row of each.
  for (int64_t p0 = chunks_begin / kChunk * kChunk; p0 < chunks_end; p0 += kChunk) {
    const int64_t decoded = std::min(kChunk, chunks_end - p0);
    for (int64_t h = 0; h < n_heads; ++h) {
      // The last head asks for the first head's next chunk, the others for the next head's rows.
      const bool last_head = h + 1 == n_heads;
      const int64_t next_p0 = last_head ? p0 + decoded : p0;
      // Past the range too: the next range is likely this thread's (attend_block).
      const int64_t next_count = last_head ? std::min(kChunk, max_positions - next_p0) : decoded;
      decode_chunk(kv, first_head + h, p0, decoded, last_head ? first_head : first_head + h + 1,
                   next_p0, next_count, raw_values, k, ws);
      const auto sees_chunk = [&](int64_t t) {
        return end_of(t) > p0 && begin_of(t) < p0 + kChunk && begin_of(t) < end_of(t);
      };
      const auto count_of = [&](int64_t t) { return std::min(kChunk, end_of(t) - p0); };
      const auto masked_of = [&](int64_t t) {  // positions before the window
        return std::max<int64_t>(0, begin_of(t) - p0);
      };
      for (int64_t t = 0; t < n_tokens;) {
        if (!sees_chunk(t)) {
          ++t;
          continue;
        }
        const int64_t count = count_of(t), masked = masked_of(t);
        // The rows of a block share `count` and `masked`. A small group takes the next tokens'
        // rows along while they see the same positions of this chunk (all but the chunk at a
        // verify step's end): their rows follow each other where this task has one KV head, and
        // each key and value decoded is then used by up to kRowBlock rows instead of n_group.
        int64_t tokens = 1;
        if (head_rows == n_group) {
          while (t + tokens < n_tokens && (tokens + 1) * n_group <= kRowBlock &&
                 sees_chunk(t + tokens) && count_of(t + tokens) == count &&
                 masked_of(t + tokens) == masked)
            ++tokens;
        }
        const int64_t block_rows = tokens * n_group;
        for (int64_t g0 = 0; g0 < block_rows; g0 += kRowBlock) {
          const int64_t nr = std::min(kRowBlock, block_rows - g0);
          const int64_t row0 = t * head_rows + h * n_group + g0;
          float* acc = partial.acc + row0 * d;
          const int64_t n_vectors = round_up_lanes(count) / kLanes;
          if (q8_cache) {
            const q8_scores::QueryRows rows{ws.q8_query_dwords.data() + row0 * d / 4,
                                            ws.q8_query_scales.data() + row0 * n_blocks,
                                            ws.q8_query_offsets.data() + row0 * n_blocks};
            k.q8.scores(rows, nr, ws.q8_keys.data(), ws.q8_key_scales.data(), n_vectors, n_blocks,
                        kChunk, scale, scores);
          } else {
            k.scores(ws.queries.data() + row0 * d, nr, ws.keys_t.data(), n_vectors, d, scale,
                     scores);
          }
          // exp(-inf - max) is ~1e-38 after the kernels' clamp: nothing against the window's
          // own weights (the largest is 1); the values below skip those positions outright.
          for (int64_t r = 0; r < nr; ++r)
            std::fill(scores + r * kChunk, scores + r * kChunk + masked,
                      -std::numeric_limits<float>::infinity());
          if (k.softmax_rows) {
            k.softmax_rows(scores, nr, count, partial.max + row0, partial.lanes + row0 * kLanes,
                           acc, d);
          } else {
            for (int64_t r = 0; r < nr; ++r)
              k.softmax(scores + r * kChunk, count, partial.max + row0 + r,
                        partial.lanes + (row0 + r) * kLanes, acc + r * d, d);
          }
          if (q8_cache) {
            k.q8v.weights(scores, nr, masked, count, ws.q8_value_scales.data(), n_blocks, kChunk,
                          ws.q8_weights.data(), ws.q8_weight_scales.data());
            k.q8v.values(ws.q8_weights.data(), ws.q8_weight_scales.data(), nr,
                         ws.q8_value_pairs.data(), masked / 2, (count + 1) / 2, n_blocks, kChunk,
                         acc);
          } else if (raw_values) {
            k.values_rows(scores + masked, nr, ws.value_rows + masked, count - masked, d, acc);
          } else {
            k.values(scores + masked, nr, ws.values.data() + masked * d, count - masked, d, acc);
          }
        }
        t += tokens;
      }
    }
  }
}

void attend_block(const KvLayerView& kv, int64_t kv_head, const float* q, int64_t q_stride,
                  int64_t n_group, int64_t n_tokens, const int64_t* n_positions, float scale,
                  float* out, int64_t out_stride, const AttendOptions& options) {
  const int64_t n_rows = n_tokens * n_group;
  int64_t max_positions = 0, min_first = INT64_MAX;
  for (int64_t t = 0; t < n_tokens; ++t) {
    max_positions = std::max(max_positions, n_positions[t]);
    min_first = std::min(min_first, options.first_position ? options.first_position[t] : 0);
  }
  thread_local AttentionPartials total, part;
  total.reset(1, n_rows, kv.head_dim);
  part.reset(1, n_rows, kv.head_dim);
  const AttentionPartial sum = total.range(0), one = part.range(0);
  clear_partial(sum, n_rows, kv.head_dim);
  // Range by range, each merged into the sum as soon as it is done: the order and arithmetic
  // attend_finish uses on ranges computed apart, so the split changes no bit.
  for (int64_t r = std::max<int64_t>(0, min_first) / kAttentionRange;
       r < attention_ranges(max_positions); ++r) {
    attend_range(kv, kv_head, 1, q, q_stride, n_group, n_tokens, n_positions, scale, r, options,
                 one);
    merge_partial(one, n_rows, kv.head_dim, sum);
  }
  finish_attention(sum, n_tokens, n_group, kv.head_dim, options.sinks, out, out_stride);
}

void attend_group(const KvLayerView& kv, int64_t kv_head, const float* q, int64_t n_group,
                  int64_t n_positions, float scale, float* out) {
  attend_block(kv, kv_head, q, 0, n_group, 1, &n_positions, scale, out, 0);
}

}  // namespace strata::ops
