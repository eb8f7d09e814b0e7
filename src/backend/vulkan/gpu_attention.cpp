#include "backend/vulkan/gpu_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "model/decoder.h"
#include "model/layer_spec.h"
#include "util/error.h"

namespace strata::vk {
uint64_t attention_upload_bytes(const AttentionWeights& a, const ModelHParams& hp) {
  const int64_t q_dim = hp.n_head * hp.head_dim, kv_dim = hp.n_head_kv * hp.head_dim;
  const ops::WeightMatrix half_q{a.wq.type, a.wq.data, a.wq.cols, a.wq.rows / 2, a.wq.row_bytes};
  // A split wq is two halves, each aligned on its own.
  return 2 * upload_bytes(half_q) + upload_bytes(a.wk) + upload_bytes(a.wv) + upload_bytes(a.wo) +
         upload_bytes(a.q_norm, hp.head_dim) + upload_bytes(a.k_norm, hp.head_dim) +
         upload_bytes(a.bq, q_dim) + upload_bytes(a.bk, kv_dim) + upload_bytes(a.bv, kv_dim) +
         upload_bytes(a.bo, hp.n_embd) + upload_bytes(a.sinks, hp.n_head);
}

GpuAttentionWeights upload_attention(DeviceWeights& w, const AttentionWeights& a,
                                     const ModelHParams& hp, int64_t il, bool gated_q) {
  const auto name = [&](LayerTensor t) { return layer_tensor_name(t, il); };
  GpuAttentionWeights l;
  if (gated_q) {
    const ops::WeightMatrix& wq = a.wq;
    const int64_t hd = hp.head_dim, rb = wq.row_bytes;
    STRATA_CHECK(wq.rows == 2 * hp.n_head * hd, "{}: {} rows, expected {} (query and gate)",
                 name(LayerTensor::attn_q), wq.rows, 2 * hp.n_head * hd);
    std::vector<uint8_t> query(static_cast<size_t>(wq.bytes() / 2)), gate(query.size());
    for (int64_t h = 0; h < hp.n_head; ++h) {
      const size_t bytes = static_cast<size_t>(hd * rb), at = static_cast<size_t>(h) * bytes;
      std::memcpy(query.data() + at, wq.row(2 * h * hd), bytes);
      std::memcpy(gate.data() + at, wq.row((2 * h + 1) * hd), bytes);
    }
    l.wq = w.matrix({wq.type, query.data(), wq.cols, wq.rows / 2, rb},
                    name(LayerTensor::attn_q) + " (query)");
    l.wq_gate = w.matrix({wq.type, gate.data(), wq.cols, wq.rows / 2, rb},
                         name(LayerTensor::attn_q) + " (gate)");
  } else {
    l.wq = w.matrix(a.wq, name(LayerTensor::attn_q));
  }
  l.wk = w.matrix(a.wk, name(LayerTensor::attn_k));
  l.wv = w.matrix(a.wv, name(LayerTensor::attn_v));
  l.wo = w.matrix(a.wo, name(LayerTensor::attn_output));
  l.q_norm = w.floats(a.q_norm, hp.head_dim, name(LayerTensor::attn_q_norm));
  l.k_norm = w.floats(a.k_norm, hp.head_dim, name(LayerTensor::attn_k_norm));
  const int64_t q_dim = hp.n_head * hp.head_dim, kv_dim = hp.n_head_kv * hp.head_dim;
  l.bq = w.floats(a.bq, q_dim, name(LayerTensor::attn_q_bias));
  l.bk = w.floats(a.bk, kv_dim, name(LayerTensor::attn_k_bias));
  l.bv = w.floats(a.bv, kv_dim, name(LayerTensor::attn_v_bias));
  l.bo = w.floats(a.bo, hp.n_embd, name(LayerTensor::attn_output_bias));
  l.extras.sinks = w.floats(a.sinks, hp.n_head, name(LayerTensor::attn_sinks));
  return l;
}

GpuAttention::GpuAttention(Device& device, const ModelHParams& hp)
    : device_(device), hp_(hp), attn_in_(device, "attention output") {}

void GpuAttention::ensure(int64_t n) {
  if (n <= tokens_) return;
  const int64_t cap = std::max(n, 2 * tokens_);
  const int64_t q_dim = hp_.n_head * hp_.head_dim, kv_dim = hp_.n_head_kv * hp_.head_dim;
  const auto f32 = [&](int64_t count, const char* what) {
    return device_.allocate(static_cast<uint64_t>(count) * 4, MemoryKind::device,
                            fmt::format("{} for {} tokens", what, cap));
  };
  q_ = f32(cap * q_dim, "queries");
  q_gate_ = f32(cap * q_dim, "attention output gates");
  k_ = f32(cap * kv_dim, "keys");
  v_ = f32(cap * kv_dim, "values");
  attn_ = f32(cap * q_dim, "attention output");
  tokens_ = cap;
}

void GpuAttention::record(GpuOps& ops, const GpuAttentionWeights& l, ActivationInput& normed,
                          const GpuStepParams& step, const KvPlacement& kv,
                          const DeviceKv::Layer& cache, uint64_t inv_freq, uint64_t out,
                          int64_t n) {
  const ModelHParams& hp = hp_;
  const int64_t q_dim = hp.n_head * hp.head_dim, kv_dim = hp.n_head_kv * hp.head_dim;
  const auto project = [&](const GpuMatrix& m, ActivationInput& in, uint64_t y, int64_t y_stride) {
    const RoundedRows x = in.for_weights(m.type);
    ops.matmul(m, x.address, x.stride, y, y_stride, n);
  };
  project(l.wq, normed, q_.address(), q_dim);
  if (l.wq_gate.address) project(l.wq_gate, normed, q_gate_.address(), q_dim);
  project(l.wk, normed, k_.address(), kv_dim);
  project(l.wv, normed, v_.address(), kv_dim);
  ops.add_bias(q_.address(), l.bq, n, q_dim);
  ops.add_bias(k_.address(), l.bk, n, kv_dim);
  ops.add_bias(v_.address(), l.bv, n, kv_dim);
  if (l.q_norm) {
    ops.rms_norm(q_.address(), hp.head_dim, l.q_norm, q_.address(), hp.head_dim, n * hp.n_head,
                 hp.head_dim, hp.rms_eps);
  }
  if (l.k_norm) {
    ops.rms_norm(k_.address(), hp.head_dim, l.k_norm, k_.address(), hp.head_dim, n * hp.n_head_kv,
                 hp.head_dim, hp.rms_eps);
  }
  const bool neox = hp.rope_style == ops::RopeStyle::neox;
  ops.rope(q_.address(), q_dim, step.positions(), inv_freq, n, hp.n_head, hp.head_dim, hp.n_rot,
           neox);
  ops.rope(k_.address(), kv_dim, step.positions(), inv_freq, n, hp.n_head_kv, hp.head_dim, hp.n_rot,
           neox);
  ops.kv_store(kv.type, k_.address(), v_.address(), cache.k, cache.v, step.slots(), n, hp.n_head_kv,
               hp.head_dim);
  // Flash-decoding for small batches over long caches (prompt batches have parallelism enough).
  const int64_t splits = n <= kMaxDecodeTokens && step.max_positions() > kAttentionBlockPositions
                             ? attention_blocks(step.max_positions())
                             : 0;
  if (splits > 0) {
    const uint64_t bytes = static_cast<uint64_t>(n * hp.n_head * splits * (hp.head_dim + 2)) * 4;
    if (bytes > partials_bytes_) {  // the first layer of a step: no recorded work reads it yet
      partials_bytes_ = std::max(bytes, 2 * partials_bytes_);
      partials_ = device_.allocate(partials_bytes_, MemoryKind::device, "attention block states");
    }
  }
  ops.attention(kv.type, q_.address(), q_dim, attn_.address(), q_dim, cache.k, cache.v,
                step.attention_info(), step.pages(), kv.page_size, n, hp.n_head, hp.n_head_kv,
                hp.head_dim, 1.0f / std::sqrt(static_cast<float>(hp.head_dim)),
                splits ? partials_.address() : 0, splits, l.extras);
  if (l.wq_gate.address) ops.sigmoid_mul(attn_.address(), q_gate_.address(), n * q_dim);
  ActivationInput attn(ops, attn_in_, attn_.address(), q_dim, n, q_dim);
  project(l.wo, attn, out, hp.n_embd);
  ops.add_bias(out, l.bo, n, hp.n_embd);
}

}  // namespace strata::vk
