#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "quant/quant.h"
#include "util/error.h"

namespace strata::ops {

void kv_store(const KvLayerView& kv, int64_t pos, const float* keys, const float* values) {
  const quant::QuantizeRowFn quantize = quant::traits(kv.type).kernels.quantize_row;
  for (int64_t h = 0; h < kv.n_kv_heads; ++h) {
    quantize(keys + h * kv.head_dim, kv.k_row(pos, h), kv.head_dim);
    quantize(values + h * kv.head_dim, kv.v_row(pos, h), kv.head_dim);
  }
}

void attend_group(const KvLayerView& kv, int64_t kv_head, const float* q, int64_t n_group,
                  int64_t n_positions, float scale, float* out) {
  const int64_t d = kv.head_dim;
  STRATA_CHECK(d <= kMaxHeadDim, "head size {} exceeds {}", d, kMaxHeadDim);
  STRATA_CHECK(n_group >= 1 && n_group <= kMaxGroup, "{} query heads per KV head exceeds {}",
               n_group, kMaxGroup);
  const quant::TypeTraits& t = quant::traits(kv.type);
  // Queries meet the keys in the keys' partner format (F16 for F16 keys, Q8_0 for Q8_0), as
  // other GGUF engines compute Q.K.
  const quant::TypeTraits& qt = quant::traits(t.activation_type);
  alignas(64) uint8_t q_packed[kMaxGroup][kMaxHeadDim * 2];
  for (int64_t g = 0; g < n_group; ++g) qt.kernels.quantize_row(q + g * d, q_packed[g], d);

  constexpr int64_t kChunk = 64;
  alignas(64) float scores[kMaxGroup][kChunk];
  alignas(64) float value[kMaxHeadDim];
  float running_max[kMaxGroup], running_sum[kMaxGroup];
  for (int64_t g = 0; g < n_group; ++g) {
    running_max[g] = -std::numeric_limits<float>::infinity();
    running_sum[g] = 0.0f;
    for (int64_t i = 0; i < d; ++i) out[g * d + i] = 0.0f;
  }
  for (int64_t p0 = 0; p0 < n_positions; p0 += kChunk) {
    const int64_t count = std::min(kChunk, n_positions - p0);
    // Scores of the chunk: each key row read once for all heads of the group.
    for (int64_t j = 0; j < count; ++j) {
      const uint8_t* k = kv.k_row(p0 + j, kv_head);
      for (int64_t g = 0; g < n_group; ++g) scores[g][j] = t.kernels.vec_dot(d, k, q_packed[g]) * scale;
    }
    // Online softmax update per head: rescale what was accumulated under the old maximum.
    for (int64_t g = 0; g < n_group; ++g) {
      float chunk_max = running_max[g];
      for (int64_t j = 0; j < count; ++j) chunk_max = std::max(chunk_max, scores[g][j]);
      const float correction = std::exp(running_max[g] - chunk_max);
      if (correction != 1.0f) {
        for (int64_t i = 0; i < d; ++i) out[g * d + i] *= correction;
        running_sum[g] *= correction;
      }
      running_max[g] = chunk_max;
      float sum = 0.0f;
      for (int64_t j = 0; j < count; ++j) {
        scores[g][j] = std::exp(scores[g][j] - chunk_max);
        sum += scores[g][j];
      }
      running_sum[g] += sum;
    }
    // Values: each row decoded once, accumulated into every head of the group.
    for (int64_t j = 0; j < count; ++j) {
      t.kernels.dequantize_row(kv.v_row(p0 + j, kv_head), value, d);
      for (int64_t g = 0; g < n_group; ++g) {
        const float w = scores[g][j];
        float* o = out + g * d;
        for (int64_t i = 0; i < d; ++i) o[i] += w * value[i];
      }
    }
  }
  for (int64_t g = 0; g < n_group; ++g) {
    const float inv = running_sum[g] > 0 ? 1.0f / running_sum[g] : 0.0f;
    for (int64_t i = 0; i < d; ++i) out[g * d + i] *= inv;
  }
}

}  // namespace strata::ops
