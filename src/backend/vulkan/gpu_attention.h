#pragma once
// The attention block of a whole-model GPU forward, as both decoders record it: q/k/v products,
// per-head q/k RMSNorm, RoPE, the cache store, attention over each token's sequence, the
// optional sigmoid output gate (qwen35moe's gated queries) and the output product. Decode steps
// over caches longer than one attention block split it over the cache (flash-decoding: a few
// tokens alone would leave most of a GPU idle); the results are the same bits either way.

#include <cstdint>

#include "backend/vulkan/activation_input.h"
#include "backend/vulkan/device_kv.h"
#include "backend/vulkan/device_weights.h"
#include "backend/vulkan/gpu_decoder_parts.h"
#include "model/blocks.h"
#include "model/hparams.h"

namespace strata::vk {

struct GpuAttentionWeights {
  GpuMatrix wq, wq_gate, wk, wv, wo;        // wq_gate: address 0 without an output gate
  uint64_t q_norm = 0, k_norm = 0;          // [head_dim], or 0
  uint64_t bq = 0, bk = 0, bv = 0, bo = 0;  // projection biases, or 0
  AttentionExtras extras;                   // sinks and sliding window (gpt-oss)
};

// Bytes upload_attention places.
uint64_t attention_upload_bytes(const AttentionWeights& a, const ModelHParams& hp);
// Uploads layer il's attention. gated_q: wq holds per head head_dim query rows then head_dim gate
// rows, uploaded as two matrices (the same dot products, each a plain product).
GpuAttentionWeights upload_attention(DeviceWeights& w, const AttentionWeights& a,
                                     const ModelHParams& hp, int64_t il, bool gated_q);

class GpuAttention {
 public:
  GpuAttention(Device& device, const ModelHParams& hp);

  void ensure(int64_t n);  // room for n tokens
  // out[n][n_embd] = attention of the n tokens (normed: their normed states), keys and values
  // stored in and read from `cache` as `kv` places them.
  void record(GpuOps& ops, const GpuAttentionWeights& l, ActivationInput& normed,
              const GpuStepParams& step, const KvPlacement& kv, const DeviceKv::Layer& cache,
              uint64_t inv_freq, uint64_t out, int64_t n);
  void release_retired() { attn_in_.release_retired(); }

 private:
  Device& device_;
  const ModelHParams& hp_;
  int64_t tokens_ = 0;
  Buffer q_, q_gate_, k_, v_, attn_;
  Buffer partials_;  // flash-decoding's block states
  uint64_t partials_bytes_ = 0;
  ActivationScratch attn_in_;
};

}  // namespace strata::vk
