#pragma once
// The decoder every supported architecture is: each layer x += mixer(norm(x)); x +=
// ffn(ffn_norm(x)), the mixer GQA attention (with the spec's variants: q/k norms, biases, sinks,
// a gated query, a sliding window) or Gated DeltaNet linear attention with a recurrent state per
// sequence, the FFN dense SwiGLU or routed experts (with the spec's routing variant and shared
// expert). What each layer is comes from its ModelSpec (model/archs/ build it); this class walks
// it on the CPU.
//
// Recurrent state of one sequence (models with Gated DeltaNet layers; recurrent_state_floats()
// floats, FP32, zero = fresh):
//   [kHeader floats: header[0] = tokens consumed so far]
//   then per recurrent layer: conv state [conv_kernel - 1][conv_dim], S [n_v_heads][d_v][d_k].
// The token count lets forward reject a batch whose positions do not continue the state (a
// scheduler that truncated the KV cache without restoring the state). Such models run a batch's
// rows in sequence order (SequenceRuns), so each sequence's tokens are one run.

#include <deque>
#include <vector>

#include "model/batch_layout.h"
#include "model/blocks.h"
#include "model/layer_spec.h"
#include "model/layer_weights.h"
#include "model/model.h"
#include "model/nextn_head.h"
#include "ops/packed_tiles.h"
#include "ops/rope.h"

namespace strata {

class DecoderModel : public Model {
 public:
  static constexpr int64_t kHeader = 16;

  DecoderModel(GgufFile file, ModelHParams hparams, ModelSpec spec);

  void forward(const ForwardBatch& batch, std::span<const SequenceKv> kv, float* logits,
               ThreadPool& pool, ForwardStats* stats) override;
  // Layers [first, last) of a forward over x ([n][n_embd] hidden states in the order BatchRows
  // gives them, updated in place): for executors that run the other layers
  // elsewhere (a hybrid plan's CPU layers). Recurrent states' headers are left for the caller
  // to advance once the whole step ran.
  void forward_layers(const ForwardBatch& batch, std::span<const SequenceKv> kv, int64_t first,
                      int64_t last, float* x, ThreadPool& pool, ForwardStats* stats);
  int64_t dense_bytes_per_token() const override;
  int64_t expert_bytes() const override;
  int64_t recurrent_bytes_per_token() const override;
  int64_t recurrent_state_floats() const override { return state_floats_; }
  const NextnHead* nextn_head() const override { return nextn_.get(); }
  bool exports_hidden() const override { return true; }
  bool layer_has_kv(int64_t layer) const override;
  std::vector<LayerDevices> layer_devices() const override;  // experts only in MoE layers
  // With settings.pack_tiles (and tile_gemm), packs the weight matrices into tiles once; without,
  // frees them. With settings.compact_tiles, where the weights are this process's own copy
  // (GgufFile::writable), rewrites the matrices that have compact tiles into them, for good.
  void set_matmul_settings(const ops::MatmulSettings& settings) override;
  int64_t packed_tile_bytes() const { return packed_tiles_.bytes(); }
  int64_t compact_tile_bytes() const override { return compact_bytes_; }
  bool set_activation_observer(ActivationObserver* observer) override {
    workspace_.observer = observer;
    return true;
  }

  // The weights as declared (views into the file), for backends that run this model elsewhere.
  const ModelSpec& spec() const { return spec_; }
  const std::vector<LayerWeights>& layers() const { return layers_; }
  const ops::WeightMatrix& token_embd() const { return token_embd_; }
  const ops::WeightMatrix& output() const { return output_; }
  const float* output_norm() const { return output_norm_; }

 private:
  void norm_rows(const float* x, const float* weight, int64_t n);
  void rewrite_into_compact_tiles();
  // Layers [first, last) over x (rows_ built).
  void run_layers(const ForwardBatch& batch, std::span<const SequenceKv> kv, int64_t first,
                  int64_t last, float* x, ThreadPool& pool, ForwardStats* stats);

  ModelSpec spec_;
  ops::Rope rope_;
  ops::WeightMatrix token_embd_;  // [n_vocab][n_embd]
  const float* output_norm_ = nullptr;
  ops::WeightMatrix output_;  // [n_vocab][n_embd]; token_embd when tied
  std::vector<LayerWeights> layers_;
  ops::PackedTiles packed_tiles_;             // declared after the matrices it points into
  std::unique_ptr<NextnHead> nextn_;          // the file's NextN/MTP block, when it keeps one
  std::deque<std::vector<float>> converted_;  // non-F32 vectors as floats (the weights point here)
  int64_t state_floats_ = 0;                  // 0: no recurrent layers
  int64_t compact_bytes_ = 0;                 // weights rewritten into compact tiles

  std::vector<float> x_, normed_, delta_;  // [n][n_embd] work buffers
  BlockWorkspace workspace_;               // the blocks' buffers
  BatchRows rows_;                         // in sequence order for recurrent models
  std::vector<RecurrentRun> layer_runs_;
  std::vector<ops::KvLayerView> layer_caches_;  // [sequences] one layer's view of each cache
};

}  // namespace strata
