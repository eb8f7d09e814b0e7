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

// A batch's rows in sequence order (stable), so each sequence's tokens are one run of rows, as
// the recurrent layers need them. Row i of the ordered batch is row order[i] of the batch.
struct SequenceRuns {
  struct Run {
    int32_t sequence;
    int64_t begin, count;
  };
  std::vector<int32_t> order, tokens, sequence;
  std::vector<int64_t> position;
  std::vector<int32_t> logit_rows;  // the layout's logit rows, as rows of the ordered batch
  std::vector<Run> runs;

  // Orders `layout` (built from `batch`) and checks that every sequence has a state buffer and
  // that each run continues it (states[s][0] counts the tokens state s has consumed).
  // n_sequences: the batch's caches; arch names the model in errors.
  void build(const ForwardBatch& batch, const BatchLayout& layout, std::span<float* const> states,
             size_t n_sequences, const std::string& arch);
};

class HybridDecoder : public Model {
 public:
  struct Options {
    std::vector<bool> recurrent;  // [n_layer] Gated DeltaNet layer (else full attention)
    GatedDeltaNetParams gdn;
    int64_t n_ff_shexp = 0;
    int64_t skipped_layers = 0;  // blocks after n_layer not loaded (multi-token prediction)
    // How the recurrent layers' input projections are stored: separate (Qwen3.5: attn_qkv,
    // attn_gate, ssm_beta, ssm_alpha), a fused ssm_ba (Qwen3-Next), or fused ssm_in + ssm_ba
    // (Qwen3-Next files converted before 2026).
    enum class GdnProjections { separate, fused_ba, fused_in };
    GdnProjections projections = GdnProjections::separate;
  };

  static constexpr int64_t kHeader = 16;

  HybridDecoder(GgufFile file, ModelHParams hparams, Options options);

  void forward(const ForwardBatch& batch, std::span<const SequenceKv> kv, float* logits,
               ThreadPool& pool, ForwardStats* stats) override;
  // Layers [first, last) of a forward over x ([n][n_embd] hidden states in SequenceRuns order,
  // updated in place), for executors that run the other layers elsewhere (a hybrid plan's CPU
  // layers). The states' headers are left for the caller to advance once the whole step ran.
  void forward_layers(const ForwardBatch& batch, std::span<const SequenceKv> kv, int64_t first,
                      int64_t last, float* x, ThreadPool& pool, ForwardStats* stats);
  int64_t dense_bytes_per_token() const override;
  int64_t expert_bytes() const override;
  int64_t recurrent_bytes_per_token() const override;
  int64_t recurrent_state_floats() const override { return state_floats_; }
  bool layer_has_kv(int64_t layer) const override;

  struct Layer {
    const float* attn_norm = nullptr;  // [n_embd]
    AttentionWeights attn;             // full-attention layers
    GatedDeltaNetWeights gdn;          // recurrent layers
    std::vector<float> conv;           // [conv_kernel][conv_dim] (transposed from the file)
    std::vector<uint8_t> split;        // fused projections' rows, regrouped (Qwen3-Next)
    int64_t state_offset = 0;          // recurrent layers: conv state offset in the buffer
    const float* post_norm = nullptr;  // [n_embd]
    MoeFfnWeights moe;
  };
  // The weights as declared (views into the file), for backends that run this model elsewhere.
  const Options& options() const { return options_; }
  const std::vector<Layer>& layers() const { return layers_; }
  const ops::WeightMatrix& token_embd() const { return token_embd_; }
  const ops::WeightMatrix& output() const { return output_; }
  const float* output_norm() const { return output_norm_; }

 private:
  void norm_rows(const float* x, const float* weight, int64_t n);
  // Layers [first, last) over x (layout_ and ordered_ built).
  void run_layers(const ForwardBatch& batch, std::span<const SequenceKv> kv, int64_t first,
                  int64_t last, float* x, ThreadPool& pool, ForwardStats* stats);

  Options options_;
  ops::Rope rope_;
  ops::WeightMatrix token_embd_;  // [n_vocab][n_embd]
  const float* output_norm_ = nullptr;
  ops::WeightMatrix output_;  // [n_vocab][n_embd]; token_embd when tied
  std::vector<Layer> layers_;
  int64_t state_floats_ = 0;

  std::vector<float> x_, normed_, delta_;  // [n][n_embd] work buffers
  BatchLayout layout_;
  SequenceRuns ordered_;  // the batch in sequence order
  std::vector<RecurrentRun> layer_runs_;
  std::vector<ops::KvLayerView> layer_caches_;
};

}  // namespace strata
