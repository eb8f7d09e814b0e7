#include "ops/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

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

// The two inner loops of attention over a chunk of positions already decoded to f32:
// scores[j] = q . k_j * scale and acc += sum_j p_j v_j. Plain loops the compiler vectorizes;
// they are instantiated once per instruction set (the body is inlined into each clone so the
// vectorizer sees the clone's target) and chosen once from CPUID.
// Four positions at a time: four independent sums keep the FMA pipeline busy.
#define STRATA_CHUNK_SCORES_BODY                                              \
  int64_t j = 0;                                                              \
  for (; j + 4 <= count; j += 4) {                                            \
    const float *k0 = keys + j * d, *k1 = k0 + d, *k2 = k1 + d, *k3 = k2 + d; \
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;                         \
    for (int64_t i = 0; i < d; ++i) {                                         \
      s0 += q[i] * k0[i];                                                     \
      s1 += q[i] * k1[i];                                                     \
      s2 += q[i] * k2[i];                                                     \
      s3 += q[i] * k3[i];                                                     \
    }                                                                         \
    scores[j] = s0 * scale;                                                   \
    scores[j + 1] = s1 * scale;                                               \
    scores[j + 2] = s2 * scale;                                               \
    scores[j + 3] = s3 * scale;                                               \
  }                                                                           \
  for (; j < count; ++j) {                                                    \
    const float* k = keys + j * d;                                            \
    float sum = 0.0f;                                                         \
    for (int64_t i = 0; i < d; ++i) sum += q[i] * k[i];                       \
    scores[j] = sum * scale;                                                  \
  }
// Output slices of 64 values stay in registers while every position of the chunk adds in.
#define STRATA_CHUNK_VALUES_BODY                          \
  int64_t i0 = 0;                                         \
  for (; i0 + 64 <= d; i0 += 64) {                        \
    float a[64];                                          \
    for (int ii = 0; ii < 64; ++ii) a[ii] = acc[i0 + ii]; \
    for (int64_t j = 0; j < count; ++j) {                 \
      const float w = weights[j];                         \
      const float* v = values + j * d + i0;               \
      for (int ii = 0; ii < 64; ++ii) a[ii] += w * v[ii]; \
    }                                                     \
    for (int ii = 0; ii < 64; ++ii) acc[i0 + ii] = a[ii]; \
  }                                                       \
  for (int64_t j = 0; j < count && i0 < d; ++j) {         \
    const float w = weights[j];                           \
    const float* v = values + j * d;                      \
    for (int64_t i = i0; i < d; ++i) acc[i] += w * v[i];  \
  }

// exp(x) for the softmax weights (x <= 0 here): 2^n * e^r with |r| <= ln2/2 and a degree-6
// polynomial, relative error ~2e-7; a loop of these vectorizes, unlike calls to std::exp.
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
// Reassociating the dot product's sum (fast-math) is what lets it vectorize.
#define STRATA_CHUNK_CLONES(suffix, isa)                                                         \
  __attribute__((target(isa), optimize("O3", "fast-math"))) void chunk_scores_##suffix(          \
      const float* q, const float* keys, int64_t count, int64_t d, float scale, float* scores) { \
    STRATA_CHUNK_SCORES_BODY                                                                     \
  }                                                                                              \
  __attribute__((target(isa), optimize("O3"))) void chunk_values_##suffix(                       \
      const float* weights, const float* values, int64_t count, int64_t d, float* acc) {         \
    STRATA_CHUNK_VALUES_BODY                                                                     \
  }                                                                                              \
  __attribute__((target(isa), optimize("O3"))) void exp_##suffix(                                \
      const float* values_in, int64_t count, float* values_out) {                                \
    STRATA_EXP_BODY                                                                              \
  }

STRATA_CHUNK_CLONES(avx512, "avx512f,avx512bw,avx512vl,avx2,fma,prefer-vector-width=512")
STRATA_CHUNK_CLONES(avx2, "avx2,fma")
STRATA_CHUNK_CLONES(baseline, "sse2")

// GCC 12's own avx512fintrin.h trips -Wmaybe-uninitialized (_mm512_undefined_*; GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// F16 rows (row j at base + j * stride bytes) to f32 rows of d values, d a multiple of the
// vector width (head sizes are 64, 128, 256).
__attribute__((target("avx512f"))) void f16_rows_avx512(const uint8_t* base, int64_t stride,
                                                        int64_t count, int64_t d, float* out) {
  for (int64_t j = 0; j < count; ++j) {
    const uint8_t* src = base + j * stride;
    for (int64_t i = 0; i < d; i += 16) {
      _mm512_storeu_ps(
          out + j * d + i,
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * i))));
    }
  }
}
__attribute__((target("avx2,f16c"))) void f16_rows_avx2(const uint8_t* base, int64_t stride,
                                                        int64_t count, int64_t d, float* out) {
  for (int64_t j = 0; j < count; ++j) {
    const uint8_t* src = base + j * stride;
    for (int64_t i = 0; i < d; i += 8) {
      _mm256_storeu_ps(
          out + j * d + i,
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i))));
    }
  }
}

#pragma GCC diagnostic pop

struct ChunkKernels {
  void (*scores)(const float*, const float*, int64_t, int64_t, float, float*);
  void (*values)(const float*, const float*, int64_t, int64_t, float*);
  void (*exp)(const float*, int64_t, float*);
  void (*f16_rows)(const uint8_t*, int64_t, int64_t, int64_t, float*);  // null without F16C
};

const ChunkKernels& chunk_kernels() {
  static const ChunkKernels k = [] {
    const CpuFeatures& cpu = cpu_features();
    if (cpu.has_avx512_level()) {
      return ChunkKernels{chunk_scores_avx512, chunk_values_avx512, exp_avx512, f16_rows_avx512};
    }
    if (cpu.has_avx2_level()) {
      return ChunkKernels{chunk_scores_avx2, chunk_values_avx2, exp_avx2, f16_rows_avx2};
    }
    return ChunkKernels{chunk_scores_baseline, chunk_values_baseline, exp_baseline, nullptr};
  }();
  return k;
}

}  // namespace

void attend_group(const KvLayerView& kv, int64_t kv_head, const float* q, int64_t n_group,
                  int64_t n_positions, float scale, float* out) {
  const int64_t d = kv.head_dim;
  STRATA_CHECK(d <= kMaxHeadDim, "head size {} exceeds {}", d, kMaxHeadDim);
  STRATA_CHECK(n_group >= 1 && n_group <= kMaxGroup, "{} query heads per KV head exceeds {}",
               n_group, kMaxGroup);
  const quant::TypeTraits& t = quant::traits(kv.type);
  // Queries meet the keys rounded to the keys' partner format (F16 for F16 keys, Q8_0 for
  // Q8_0), as other GGUF engines compute Q.K; then everything runs on f32 copies of a chunk of
  // keys and values, each decoded once for the whole group of heads.
  const quant::TypeTraits& qt = quant::traits(t.activation_type);
  alignas(64) uint8_t packed[kMaxHeadDim * 2];
  alignas(64) float queries[kMaxGroup][kMaxHeadDim];
  for (int64_t g = 0; g < n_group; ++g) {
    qt.kernels.quantize_row(q + g * d, packed, d);
    qt.kernels.dequantize_row(packed, queries[g], d);
  }

  constexpr int64_t kChunk = 64;
  thread_local std::vector<float> keys, values;  // [kChunk][d], reused across calls
  keys.resize(static_cast<size_t>(kChunk * d));
  values.resize(static_cast<size_t>(kChunk * d));
  alignas(64) float scores[kMaxGroup][kChunk];
  float running_max[kMaxGroup], running_sum[kMaxGroup];
  for (int64_t g = 0; g < n_group; ++g) {
    running_max[g] = -std::numeric_limits<float>::infinity();
    running_sum[g] = 0.0f;
    for (int64_t i = 0; i < d; ++i) out[g * d + i] = 0.0f;
  }
  const ChunkKernels& k = chunk_kernels();
  const bool f16_fast = kv.type == GgmlType::F16 && k.f16_rows && d % 16 == 0;
  const int64_t stride = kv.n_kv_heads * kv.head_row_bytes;  // next slot, same head
  STRATA_CHECK(!kv.pages || kv.page_size > 0, "paged KV view without a page size");
  for (int64_t p0 = 0; p0 < n_positions; p0 += kChunk) {
    const int64_t count = std::min(kChunk, n_positions - p0);
    // Decode the chunk run by run, a run being positions in consecutive slots (one page).
    for (int64_t j0 = 0; j0 < count;) {
      const int64_t run = std::min(count - j0, kv.contiguous_from(p0 + j0));
      const uint8_t* k_rows = kv.k_row(p0 + j0, kv_head);
      const uint8_t* v_rows = kv.v_row(p0 + j0, kv_head);
      float* k_out = keys.data() + j0 * d;
      float* v_out = values.data() + j0 * d;
      if (f16_fast) {
        k.f16_rows(k_rows, stride, run, d, k_out);
        k.f16_rows(v_rows, stride, run, d, v_out);
      } else {
        for (int64_t j = 0; j < run; ++j) {
          t.kernels.dequantize_row(k_rows + j * stride, k_out + j * d, d);
          t.kernels.dequantize_row(v_rows + j * stride, v_out + j * d, d);
        }
      }
      j0 += run;
    }
    for (int64_t g = 0; g < n_group; ++g) {
      k.scores(queries[g], keys.data(), count, d, scale, scores[g]);
      // Online softmax: rescale what was accumulated under the old maximum.
      float chunk_max = running_max[g];
      for (int64_t j = 0; j < count; ++j) chunk_max = std::max(chunk_max, scores[g][j]);
      const float correction = std::exp(running_max[g] - chunk_max);
      if (correction != 1.0f) {
        for (int64_t i = 0; i < d; ++i) out[g * d + i] *= correction;
        running_sum[g] *= correction;
      }
      running_max[g] = chunk_max;
      for (int64_t j = 0; j < count; ++j) scores[g][j] -= chunk_max;
      k.exp(scores[g], count, scores[g]);
      float sum = 0.0f;
      for (int64_t j = 0; j < count; ++j) sum += scores[g][j];
      running_sum[g] += sum;
      k.values(scores[g], values.data(), count, d, out + g * d);
    }
  }
  for (int64_t g = 0; g < n_group; ++g) {
    const float inv = running_sum[g] > 0 ? 1.0f / running_sum[g] : 0.0f;
    for (int64_t i = 0; i < d; ++i) out[g * d + i] *= inv;
  }
}

}  // namespace strata::ops
