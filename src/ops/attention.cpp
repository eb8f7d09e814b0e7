#include "ops/attention.h"

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

void attend(const KvLayerView& kv, int64_t kv_head, const float* q, int64_t n_positions,
            float scale, float* out) {
  STRATA_CHECK(kv.head_dim <= kMaxHeadDim, "head size {} exceeds {}", kv.head_dim, kMaxHeadDim);
  const quant::TypeTraits& t = quant::traits(kv.type);
  // The query meets the keys in the keys' partner format (F16 for F16 keys, Q8_0 for Q8_0), as
  // other GGUF engines compute Q.K.
  const quant::TypeTraits& qt = quant::traits(t.activation_type);
  alignas(64) uint8_t q_packed[kMaxHeadDim * 2];
  qt.kernels.quantize_row(q, q_packed, kv.head_dim);

  alignas(64) float value[kMaxHeadDim];
  const int64_t d = kv.head_dim;
  for (int64_t i = 0; i < d; ++i) out[i] = 0.0f;
  float running_max = -std::numeric_limits<float>::infinity();
  double running_sum = 0;
  for (int64_t pos = 0; pos < n_positions; ++pos) {
    const float score = t.kernels.vec_dot(d, kv.k_row(pos, kv_head), q_packed) * scale;
    float weight = 1.0f;
    if (score > running_max) {
      // Rescale what was accumulated under the old maximum.
      const float correction = std::exp(running_max - score);
      for (int64_t i = 0; i < d; ++i) out[i] *= correction;
      running_sum *= correction;
      running_max = score;
    } else {
      weight = std::exp(score - running_max);
    }
    running_sum += weight;
    t.kernels.dequantize_row(kv.v_row(pos, kv_head), value, d);
    for (int64_t i = 0; i < d; ++i) out[i] += weight * value[i];
  }
  const float inv = running_sum > 0 ? static_cast<float>(1.0 / running_sum) : 0.0f;
  for (int64_t i = 0; i < d; ++i) out[i] *= inv;
}

}  // namespace strata::ops
