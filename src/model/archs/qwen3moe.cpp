// qwen3moe (Qwen3-30B-A3B, Qwen3-Coder-30B-A3B, Qwen3-235B-A22B): pre-norm decoder, GQA with
// per-head q/k RMSNorm, NEOX RoPE, softmax router over all experts, top-k renormalized, SwiGLU
// experts, no shared expert.

#include "model/archs/archs.h"

namespace strata::archs {

std::unique_ptr<Model> make_qwen3moe(GgufFile file) {
  ModelHParams hp = read_common_hparams(file, "qwen3moe");
  hp.rope_style = ops::RopeStyle::neox;
  hp.expert_weights_norm = true;
  LayerSpec layer;
  layer.attention.qk_norm = AttentionLayout::QkNorm::required;
  layer.moe = true;
  ModelSpec spec = same_layers(hp.n_layer, layer);
  return make_decoder(std::move(file), std::move(hp), std::move(spec));
}

}  // namespace strata::archs
