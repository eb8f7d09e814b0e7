#pragma once
// The classic pre-norm decoder: x += attention(norm(x)); x += ffn(norm(x)), with GQA attention
// (optionally per-head q/k RMSNorm) and either a dense SwiGLU FFN or a routed MoE FFN. llama,
// qwen3 and qwen3moe are this model with different options (see model/archs/).

#include <vector>

#include "model/batch_layout.h"
#include "model/blocks.h"
#include "model/decoder.h"
#include "model/model.h"
#include "ops/rope.h"

namespace strata {

class StandardDecoder : public Model {
 public:
  struct Options {
    AttentionLayout attention;
    bool moe = false;  // routed experts instead of a dense FFN
    MoeLayout moe_layout;
    int64_t leading_dense = 0;  // MoE models: the first layers keep a dense FFN (GLM-4.5)
    // The pre-FFN norm's tensor name (gpt-oss and GLM-4.5 call it post_attention_norm).
    const char* ffn_norm = "ffn_norm";
    int64_t skipped_layers = 0;  // blocks after n_layer not loaded (multi-token prediction)
  };

  StandardDecoder(GgufFile file, ModelHParams hparams, Options options);

  void forward(const ForwardBatch& batch, std::span<const SequenceKv> kv, float* logits,
               ThreadPool& pool, ForwardStats* stats) override;
  // Layers [first, last) of a forward over x ([n][n_embd] hidden states in batch order, updated
  // in place): for executors that run the other layers elsewhere (a hybrid plan's CPU layers).
  void forward_layers(const ForwardBatch& batch, std::span<const SequenceKv> kv, int64_t first,
                      int64_t last, float* x, ThreadPool& pool, ForwardStats* stats);
  int64_t dense_bytes_per_token() const override;
  int64_t expert_bytes() const override;

  struct Layer {
    const float* attn_norm = nullptr;  // [n_embd]
    AttentionWeights attn;
    const float* ffn_norm = nullptr;  // [n_embd]
    DenseFfnWeights dense;            // dense layers
    MoeFfnWeights moe;                // MoE layers (moe.router.data set)
    bool is_moe() const { return moe.router.data != nullptr; }
  };
  // The weights as declared (views into the file), for backends that run this model elsewhere.
  const Options& options() const { return options_; }
  const std::vector<Layer>& layers() const { return layers_; }
  const ops::WeightMatrix& token_embd() const { return token_embd_; }
  const ops::WeightMatrix& output() const { return output_; }
  const float* output_norm() const { return output_norm_; }

 private:
  // rms_norm of n rows of x into normed_.
  void norm_rows(const float* x, const float* weight, int64_t n);
  // Layers [first, last) over x_ (layout_ built).
  void run_layers(std::span<const SequenceKv> kv, int64_t first, int64_t last, float* x,
                  ThreadPool& pool, ForwardStats* stats);

  Options options_;
  ops::Rope rope_;
  ops::WeightMatrix token_embd_;  // [n_vocab][n_embd]
  const float* output_norm_ = nullptr;
  ops::WeightMatrix output_;  // [n_vocab][n_embd]; token_embd when tied
  std::vector<Layer> layers_;
  std::vector<float> x_, normed_, delta_;  // [n][n_embd] work buffers
  BatchLayout layout_;
  std::vector<ops::KvLayerView> layer_caches_;  // [sequences] one layer's view of each cache
};

}  // namespace strata
