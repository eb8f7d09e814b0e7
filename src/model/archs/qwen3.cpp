// qwen3 (dense Qwen3): pre-norm decoder, GQA with per-head q/k RMSNorm, NEOX RoPE, SwiGLU FFN.

#include "model/archs/archs.h"

namespace strata::archs {

std::unique_ptr<Model> make_qwen3(GgufFile file) {
  ModelHParams hp = read_common_hparams(file, "qwen3");
  hp.rope_style = ops::RopeStyle::neox;
  LayerSpec layer;
  layer.attention.qk_norm = AttentionLayout::QkNorm::required;
  ModelSpec spec = same_layers(hp.n_layer, layer);
  return make_decoder(std::move(file), std::move(hp), std::move(spec));
}

}  // namespace strata::archs
