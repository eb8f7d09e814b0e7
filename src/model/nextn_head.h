#pragma once
// The multi-token-prediction block some MoE files keep after their layers (GLM-4.5's NextN,
// `blk.{n_layer}.nextn.*`; the MTP block of Qwen3.5/3.6 files converted with it): one more
// decoder layer that reads the trunk's last hidden state at position p together with the token
// at p + 1, and predicts the token at p + 2. A drafter runs it to guess the next tokens.
//
// Row i: x = eh_proj([enorm(embedding(tokens[i])), hnorm(hidden[i])]), then the layer (attention
// over the head's own cache, then the FFN, each with its residual), then the head's norm and the
// output matrix (the model's own unless the block keeps one). The trunk's state it reads is the
// one the output matrix reads (after output_norm), as vLLM's MTP proposers take it and as
// llama.cpp's MTP drafting ends up reading it (its "pre-norm" buffer holds the normed rows: checked
// against its output in tests/unit/model/nextn_head_test.cpp); for a further, chained draft the
// head's own output before its norm stands in for it, as both engines chain.

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/blocks.h"
#include "model/hparams.h"
#include "model/layer_spec.h"
#include "model/layer_weights.h"
#include "model/weight_loader.h"
#include "ops/attention.h"
#include "ops/rope.h"
#include "util/thread_pool.h"

namespace strata {

// The buffers one caller of NextnHead::forward computes in.
struct NextnWorkspace {
  BlockWorkspace blocks;
  std::vector<float> x, joined, normed, delta;
  std::vector<int32_t> sequence;
  std::vector<int64_t> position;
  ops::QuantizedRows projection_input;
};

class NextnHead {
 public:
  // The first skipped block (hp.n_layer) of the loader's file, laid out as the trunk's last
  // attention layer; null when the file keeps none (no skipped block, or no nextn.eh_proj).
  // Throws strata::Error naming a tensor that is there but misshapen.
  static std::unique_ptr<NextnHead> load(WeightLoader& loader, const ModelHParams& hp,
                                         const ModelSpec& spec, const ops::WeightMatrix& token_embd,
                                         const ops::WeightMatrix& output, const float* output_norm);

  // Rows [0, n) at positions pos0 .. pos0 + n - 1 of `cache` (the head's own single-layer KV
  // cache: keys and values are stored there, then each row attends over [0, its position]).
  // hidden: [n][n_embd] the state at each position; tokens: the token after each. Writes the
  // head's pre-norm output to hidden_out ([n][n_embd]) and, when logits is not null, the last
  // row's logits ([n_vocab]).
  void forward(std::span<const int32_t> tokens, const float* hidden, int64_t pos0,
               const ops::KvLayerView& cache, float* hidden_out, float* logits, NextnWorkspace& ws,
               ThreadPool& pool) const;

  const ModelHParams& hparams() const { return hp_; }

  // Calls layer(its LayerWeights) and matrix(m) for its other matrices that only take products
  // (not the embedding, nor the head where it is the embedding).
  template <typename Layer, typename Matrix>
  void for_each_matrix(Layer&& layer, Matrix&& matrix) {
    layer(layer_);
    matrix(eh_proj_);
    if (head_.data != embedding_.data) matrix(head_);
  }

 private:
  NextnHead(const ModelHParams& hp, const LayerSpec& layer_spec);

  ModelHParams hp_;
  LayerSpec layer_spec_;
  ops::Rope rope_;
  LayerWeights layer_;
  ops::WeightMatrix eh_proj_;  // [2 * n_embd] -> [n_embd]
  const float* enorm_ = nullptr;
  const float* hnorm_ = nullptr;
  const float* head_norm_ = nullptr;  // shared_head_norm, else the model's output_norm
  ops::WeightMatrix embedding_;       // nextn.embed_tokens, else the model's token_embd
  ops::WeightMatrix head_;            // nextn.shared_head_head, else the model's output
};

}  // namespace strata
