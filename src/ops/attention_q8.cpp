#include "ops/attention_q8.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/transpose_avx2.h"
#include "ops/transpose_avx512.h"
#include "quant/blocks.h"
#include "util/fp16.h"

namespace strata::ops::q8_scores {
namespace {

constexpr int64_t kLanes = 16;
constexpr int64_t kDwords = quant::kQK / 4;  // dwords of codes per block
constexpr int64_t kBlockBytes = sizeof(quant::BlockQ8_0);
constexpr uint32_t kBias = 0x80808080u;  // + 128 on each code byte

// ---- the loops: one chain per (query, key), vectorized over keys ----------------------------

// Exact integer sum of code products of one block: the key dwords carry codes + 128.
inline int32_t biased_dot(uint32_t kw, uint32_t qw) {
  int32_t s = 0;
  for (int t = 0; t < 4; ++t) {
    s += static_cast<int32_t>((kw >> (8 * t)) & 0xff) *
         static_cast<int32_t>(static_cast<int8_t>((qw >> (8 * t)) & 0xff));
  }
  return s;
}

#define STRATA_Q8_SCORES_BODY(MADD)                                              \
  const int64_t n = n_vectors * kLanes;                                          \
  for (int64_t r = 0; r < n_rows; ++r) {                                         \
    const uint32_t* qd = q.dwords + r * n_blocks * kDwords;                      \
    float acc[4 * kLanes] = {};                                                  \
    for (int64_t b = 0; b < n_blocks; ++b) {                                     \
      int32_t isum[4 * kLanes] = {};                                             \
      for (int64_t g = 0; g < kDwords; ++g) {                                    \
        const uint32_t qw = qd[b * kDwords + g];                                 \
        const uint32_t* k = keys + (b * kDwords + g) * stride;                   \
        for (int64_t l = 0; l < n; ++l) isum[l] += biased_dot(k[l], qw);         \
      }                                                                          \
      const float dq = q.scales[r * n_blocks + b];                               \
      const int32_t offset = q.offsets[r * n_blocks + b];                        \
      const float* dk = key_scales + b * stride;                                 \
      for (int64_t l = 0; l < n; ++l)                                            \
        acc[l] = MADD(static_cast<float>(isum[l] - offset), dk[l] * dq, acc[l]); \
    }                                                                            \
    for (int64_t l = 0; l < n; ++l) scores[r * stride + l] = acc[l] * scale;     \
  }

#define STRATA_FUSED(a, b, c) std::fma(a, b, c)
#define STRATA_PLAIN(a, b, c) ((a) * (b) + (c))

__attribute__((target("avx2,fma"), optimize("O3"))) void scores_loop_avx2(
    const QueryRows& q, int64_t n_rows, const uint32_t* keys, const float* key_scales,
    int64_t n_vectors, int64_t n_blocks, int64_t stride, float scale, float* scores) {
  STRATA_Q8_SCORES_BODY(STRATA_FUSED)
}
__attribute__((target("sse2"), optimize("O3"))) void scores_loop_baseline(
    const QueryRows& q, int64_t n_rows, const uint32_t* keys, const float* key_scales,
    int64_t n_vectors, int64_t n_blocks, int64_t stride, float scale, float* scores) {
  STRATA_Q8_SCORES_BODY(STRATA_PLAIN)
}

void keys_portable(const uint8_t* const* rows, int64_t count, int64_t n_blocks, int64_t stride,
                   uint32_t* keys, float* key_scales) {
  const int64_t padded = (count + kLanes - 1) / kLanes * kLanes;
  for (int64_t j = 0; j < padded; ++j) {
    for (int64_t b = 0; b < n_blocks; ++b) {
      const uint8_t* block = j < count ? rows[j] + b * kBlockBytes : nullptr;
      f16_bits d = 0;
      if (block) std::memcpy(&d, block, sizeof d);
      key_scales[b * stride + j] = block ? f16_to_f32(d) : 0.0f;
      for (int64_t g = 0; g < kDwords; ++g) {
        uint32_t w = 0;
        if (block) std::memcpy(&w, block + 2 + 4 * g, sizeof w);
        keys[(b * kDwords + g) * stride + j] = w ^ kBias;
      }
    }
  }
}

// ---- AVX2 ---------------------------------------------------------------------------------

// keys_portable's layout, 8 keys at a time: a block's 32 code bytes of each key transposed as
// 8 x 8 dwords, the 8 scales converted together.
__attribute__((target("avx2,f16c"))) void keys_avx2(const uint8_t* const* rows, int64_t count,
                                                    int64_t n_blocks, int64_t stride,
                                                    uint32_t* keys, float* key_scales) {
  const int64_t padded = (count + kLanes - 1) / kLanes * kLanes;
  const __m256i bias = _mm256_set1_epi32(static_cast<int>(kBias));
  for (int64_t j0 = 0; j0 < padded; j0 += 8) {
    const int64_t n = std::clamp<int64_t>(count - j0, 0, 8);
    for (int64_t b = 0; b < n_blocks; ++b) {
      __m256 r[8];
      alignas(16) f16_bits scales[8] = {};
      for (int m = 0; m < 8; ++m) {
        if (m >= n) {
          r[m] = _mm256_setzero_ps();
          continue;
        }
        const uint8_t* block = rows[j0 + m] + b * kBlockBytes;
        r[m] = _mm256_loadu_ps(reinterpret_cast<const float*>(block + 2));
        std::memcpy(&scales[m], block, 2);
      }
      transpose8x8(r);  // r[g]: dword g of the 8 keys
      _mm256_storeu_ps(key_scales + b * stride + j0,
                       _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(scales))));
      for (int g = 0; g < kDwords; ++g) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(keys + (b * kDwords + g) * stride + j0),
                            _mm256_xor_si256(_mm256_castps_si256(r[g]), bias));
      }
    }
  }
}

// NR query rows against 8 keys. No int8 dot product without VNNI, and vpmaddubsw saturates on
// biased codes, so codes are widened to int16 and vpmaddwd gives exact int32 pair sums: a
// vector's keys 0-3 (low half) and 4-7 (high half) are summed apart over the block's dwords,
// one hadd then folds pairs (keys in the order 0 1 4 5 | 2 3 6 7, which one permute restores)
// and the float step is the loops' fma.
template <int NR>
__attribute__((target("avx2,fma"))) void scores_block_avx2(const QueryRows& q, const uint32_t* keys,
                                                           const float* key_scales,
                                                           int64_t n_blocks, int64_t stride,
                                                           float scale, float* scores) {
  __m256 acc[NR];
  for (int r = 0; r < NR; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    __m256i low[NR], high[NR];
    for (int r = 0; r < NR; ++r) low[r] = high[r] = _mm256_setzero_si256();
    for (int64_t g = 0; g < kDwords; ++g) {
      const __m256i k =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys + (b * kDwords + g) * stride));
      const __m256i k_low = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(k));
      const __m256i k_high = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(k, 1));
      for (int r = 0; r < NR; ++r) {
        const int qw = static_cast<int>(q.dwords[(r * n_blocks + b) * kDwords + g]);
        const __m256i qq = _mm256_broadcastq_epi64(_mm_cvtepi8_epi16(_mm_cvtsi32_si128(qw)));
        low[r] = _mm256_add_epi32(low[r], _mm256_madd_epi16(k_low, qq));
        high[r] = _mm256_add_epi32(high[r], _mm256_madd_epi16(k_high, qq));
      }
    }
    const __m256 dk = _mm256_loadu_ps(key_scales + b * stride);
    for (int r = 0; r < NR; ++r) {
      const __m256i isum = _mm256_permute4x64_epi64(_mm256_hadd_epi32(low[r], high[r]), 0b11011000);
      const __m256 dq = _mm256_set1_ps(q.scales[r * n_blocks + b]);
      const __m256i offset = _mm256_set1_epi32(q.offsets[r * n_blocks + b]);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(isum, offset)),
                               _mm256_mul_ps(dk, dq), acc[r]);
    }
  }
  const __m256 s = _mm256_set1_ps(scale);
  for (int r = 0; r < NR; ++r) _mm256_storeu_ps(scores + r * stride, _mm256_mul_ps(acc[r], s));
}

using BlockFn = void (*)(const QueryRows&, const uint32_t*, const float*, int64_t, int64_t, float,
                         float*);
constexpr BlockFn kAvx2Rows[4] = {scores_block_avx2<1>, scores_block_avx2<2>, scores_block_avx2<3>,
                                  scores_block_avx2<4>};

void scores_avx2(const QueryRows& q, int64_t n_rows, const uint32_t* keys, const float* key_scales,
                 int64_t n_vectors, int64_t n_blocks, int64_t stride, float scale, float* scores) {
  for (int64_t j = 0; j < n_vectors * kLanes; j += 8)
    kAvx2Rows[n_rows - 1](q, keys + j, key_scales + j, n_blocks, stride, scale, scores + j);
}

// ---- AVX-512 VNNI ------------------------------------------------------------------------

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// Two blocks of 16 keys at a time: their 64 code bytes a row, transposed as 16 x 16 dwords.
__attribute__((target("avx512f,avx512vl"))) void keys_avx512(const uint8_t* const* rows,
                                                             int64_t count, int64_t n_blocks,
                                                             int64_t stride, uint32_t* keys,
                                                             float* key_scales) {
  const __m512i bias = _mm512_set1_epi32(static_cast<int>(kBias));
  for (int64_t j0 = 0; j0 < count; j0 += kLanes) {
    const int64_t n = std::min(kLanes, count - j0);
    for (int64_t b0 = 0; b0 < n_blocks; b0 += 2) {
      const int64_t pair = std::min<int64_t>(2, n_blocks - b0);
      __m512i r[16];
      alignas(32) f16_bits scales[2][16] = {};
      for (int m = 0; m < 16; ++m) {
        if (m >= n) {
          r[m] = _mm512_setzero_si512();
          continue;
        }
        const uint8_t* block = rows[j0 + m] + b0 * kBlockBytes;
        const __m256i first = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
        const __m256i second =
            pair == 2
                ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + kBlockBytes + 2))
                : _mm256_setzero_si256();
        r[m] = _mm512_inserti64x4(_mm512_castsi256_si512(first), second, 1);
        std::memcpy(&scales[0][m], block, 2);
        if (pair == 2) std::memcpy(&scales[1][m], block + kBlockBytes, 2);
      }
      transpose16x16(r);  // r[8h + g]: dword g of block b0 + h, key m in lane m
      for (int h = 0; h < pair; ++h) {
        _mm512_storeu_ps(
            key_scales + (b0 + h) * stride + j0,
            _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(scales[h]))));
        for (int g = 0; g < kDwords; ++g) {
          _mm512_storeu_si512(keys + ((b0 + h) * kDwords + g) * stride + j0,
                              _mm512_xor_si512(r[8 * h + g], bias));
        }
      }
    }
  }
}

// NR query rows against NV vectors of 16 keys; block by block, the integer sums of the block in
// NR * NV registers, then one fused multiply-add per (row, vector).
template <int NR, int NV>
__attribute__((target("avx512f,avx512vnni"))) void scores_block(const QueryRows& q,
                                                                const uint32_t* keys,
                                                                const float* key_scales,
                                                                int64_t n_blocks, int64_t stride,
                                                                float scale, float* scores) {
  __m512 acc[NR][NV];
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    __m512i isum[NR][NV];
    for (int r = 0; r < NR; ++r)
      for (int v = 0; v < NV; ++v) isum[r][v] = _mm512_setzero_si512();
    for (int64_t g = 0; g < kDwords; ++g) {
      __m512i k[NV];
      for (int v = 0; v < NV; ++v)
        k[v] = _mm512_loadu_si512(keys + (b * kDwords + g) * stride + v * kLanes);
      for (int r = 0; r < NR; ++r) {
        const __m512i qw =
            _mm512_set1_epi32(static_cast<int>(q.dwords[(r * n_blocks + b) * kDwords + g]));
        for (int v = 0; v < NV; ++v) isum[r][v] = _mm512_dpbusd_epi32(isum[r][v], k[v], qw);
      }
    }
    __m512 dk[NV];
    for (int v = 0; v < NV; ++v) dk[v] = _mm512_loadu_ps(key_scales + b * stride + v * kLanes);
    for (int r = 0; r < NR; ++r) {
      const __m512 dq = _mm512_set1_ps(q.scales[r * n_blocks + b]);
      const __m512i offset = _mm512_set1_epi32(q.offsets[r * n_blocks + b]);
      for (int v = 0; v < NV; ++v) {
        acc[r][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(isum[r][v], offset)),
                                    _mm512_mul_ps(dk[v], dq), acc[r][v]);
      }
    }
  }
  const __m512 s = _mm512_set1_ps(scale);
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < NV; ++v)
      _mm512_storeu_ps(scores + r * stride + v * kLanes, _mm512_mul_ps(acc[r][v], s));
}

#pragma GCC diagnostic pop

template <int NR>
constexpr BlockFn kBlocks[2] = {scores_block<NR, 1>, scores_block<NR, 2>};
constexpr const BlockFn* kRows[4] = {kBlocks<1>, kBlocks<2>, kBlocks<3>, kBlocks<4>};

// Two vectors of keys at a time (8 integer and 8 float accumulators for 4 rows).
void scores_avx512(const QueryRows& q, int64_t n_rows, const uint32_t* keys,
                   const float* key_scales, int64_t n_vectors, int64_t n_blocks, int64_t stride,
                   float scale, float* scores) {
  for (int64_t v0 = 0; v0 < n_vectors; v0 += 2) {
    const int64_t nv = std::min<int64_t>(2, n_vectors - v0);
    kRows[n_rows - 1][nv - 1](q, keys + v0 * kLanes, key_scales + v0 * kLanes, n_blocks, stride,
                              scale, scores + v0 * kLanes);
  }
}

}  // namespace

void prepare_query(const void* q8_0_blocks, int64_t n_blocks, uint32_t* dwords, float* scales,
                   int32_t* offsets) {
  const auto* blocks = static_cast<const quant::BlockQ8_0*>(q8_0_blocks);
  for (int64_t b = 0; b < n_blocks; ++b) {
    scales[b] = f16_to_f32(blocks[b].d);
    std::memcpy(dwords + b * kDwords, blocks[b].qs, quant::kQK);
    int32_t sum = 0;
    for (int i = 0; i < quant::kQK; ++i) sum += blocks[b].qs[i];
    offsets[b] = 128 * sum;
  }
}

Kernels kernels_avx512() {
  return {keys_avx512, scores_avx512};
}
Kernels kernels_avx2() {
  return {keys_avx2, scores_avx2};
}
Kernels kernels_avx2_loops() {
  return {keys_portable, scores_loop_avx2};
}
Kernels kernels_baseline() {
  return {keys_portable, scores_loop_baseline};
}

}  // namespace strata::ops::q8_scores
