#pragma once
// A hybrid decoder (qwen35moe: Qwen3.5/3.6-35B-A3B): most layers are Gated DeltaNet linear
// attention with a recurrent state per sequence, every `full_attention_interval`-th layer is
// gated full attention with a KV cache; every layer ends in a MoE FFN with a sigmoid-gated
// shared expert. Each layer: x += mixer(norm(x)); x += moe(post_attention_norm(x)).
//
// Recurrent state of one sequence (recurrent_state_floats() floats, FP32, zero = fresh):
//   [kHeader floats: header[0] = tokens consumed so far]
//   then per recurrent layer: conv state [conv_kernel - 1][conv_dim], S [n_v_heads][d_v][d_k].
// The token count lets forward reject a batch whose positions do not continue the state (a
// scheduler that truncated the KV cache without restoring the state).

#include <vector>

#include "model/batch_layout.h"
#include "model/blocks.h"
#include "model/model.h"
#include "ops/rope.h"

namespace strata {

class HybridDecoder : public Model {
 public:
  struct Options {
    std::vector<bool> recurrent;  // [n_layer] Gated DeltaNet layer (else full attention)
    GatedDeltaNetParams gdn;
    int64_t n_ff_shexp = 0;
    int64_t skipped_layers = 0;  // blocks after n_layer not loaded (multi-token prediction)
  };

  static constexpr int64_t kHeader = 16;

  HybridDecoder(GgufFile file, ModelHParams hparams, Options options);

  void forward(const ForwardBatch& batch, std::span<const SequenceKv> kv, float* logits,
               ThreadPool& pool, ForwardStats* stats) override;
  int64_t dense_bytes_per_token() const override;
  int64_t expert_bytes() const override;
  int64_t recurrent_bytes_per_token() const override;
  int64_t recurrent_state_floats() const override { return state_floats_; }
  bool layer_has_kv(int64_t layer) const override;

 private:
  struct Layer {
    const float* attn_norm = nullptr;  // [n_embd]
    AttentionWeights attn;             // full-attention layers
    GatedDeltaNetWeights gdn;          // recurrent layers
    std::vector<float> conv;           // [conv_kernel][conv_dim] (transposed from the file)
    int64_t state_offset = 0;          // recurrent layers: conv state offset in the buffer
    const float* post_norm = nullptr;  // [n_embd]
    MoeFfnWeights moe;
  };

  void norm_rows(const float* x, const float* weight, int64_t n);
  // Orders the batch's rows by sequence (stable), so each sequence's tokens are one run.
  void group_by_sequence(const ForwardBatch& batch, std::span<float* const> states);

  Options options_;
  ops::Rope rope_;
  ops::WeightMatrix token_embd_;  // [n_vocab][n_embd]
  const float* output_norm_ = nullptr;
  ops::WeightMatrix output_;  // [n_vocab][n_embd]; token_embd when tied
  std::vector<Layer> layers_;
  int64_t state_floats_ = 0;

  std::vector<float> x_, normed_, delta_;  // [n][n_embd] work buffers
  BatchLayout layout_;
  // The batch in sequence order: row i is the original row order_[i].
  std::vector<int32_t> order_, tokens_, sequence_, logit_rows_;
  std::vector<int64_t> position_;
  struct SequenceRun {
    int32_t sequence;
    int64_t begin, count;
  };
  std::vector<SequenceRun> runs_;
  std::vector<RecurrentRun> layer_runs_;
  std::vector<ops::KvLayerView> layer_caches_;
};

}  // namespace strata
