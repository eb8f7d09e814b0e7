#pragma once
// One layer's weights as a decoder runs them (views into the model file, and the few buffers
// built at load: transposed convolutions, regrouped fused projections), loaded from the tensors
// its LayerSpec lists (model/layer_spec.h) with their shapes checked.

#include <cstdint>
#include <vector>

#include "model/blocks.h"
#include "model/hparams.h"
#include "model/layer_spec.h"
#include "model/weight_loader.h"

namespace strata {

struct LayerWeights {
  const float* attn_norm = nullptr;  // [n_embd]
  AttentionWeights attn;             // attention layers
  GatedDeltaNetWeights gdn;          // Gated DeltaNet layers
  std::vector<float> conv;           // [conv_kernel][conv_dim] (transposed from the file)
  std::vector<uint8_t> split;        // fused projections' rows, regrouped (Qwen3-Next)
  int64_t state_offset = 0;          // Gated DeltaNet layers: conv state offset in the buffer
  const float* ffn_norm = nullptr;   // [n_embd]
  DenseFfnWeights dense;             // dense FFN layers
  MoeFfnWeights moe;                 // MoE layers (moe.router.data set)
};

// Calls f(matrix) for each weight matrix of the layer (the views its kind leaves empty too).
template <typename F>
void for_each_matrix(LayerWeights& l, F&& f) {
  for (ops::WeightMatrix* w :
       {&l.attn.wq, &l.attn.wk, &l.attn.wv, &l.attn.wo, &l.gdn.qkv, &l.gdn.gate, &l.gdn.beta,
        &l.gdn.alpha, &l.gdn.out, &l.dense.gate, &l.dense.up, &l.dense.down, &l.moe.router,
        &l.moe.gate_exps, &l.moe.up_exps, &l.moe.down_exps, &l.moe.shared.gate, &l.moe.shared.up,
        &l.moe.shared.down})
    f(*w);
}

// Loads layer `layer` of `spec` (state_offset is the caller's). Throws strata::Error naming the
// tensor for one missing or misshapen.
LayerWeights load_layer_weights(WeightLoader& loader, const ModelHParams& hp, const ModelSpec& spec,
                                int64_t layer);

}  // namespace strata
