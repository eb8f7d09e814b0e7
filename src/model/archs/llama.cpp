// llama: pre-norm decoder, GQA without q/k norms, NORM-style RoPE (adjacent pairs) over
// rope.dimension_count dims, SwiGLU FFN, output tied to token_embd when output.weight is absent.
// With expert_count > 0 it is the Mixtral layout: every FFN a MoE of feed_forward_length-wide
// SwiGLU experts (llama has no expert_feed_forward_length), softmax router over all experts,
// top-k renormalized, no shared expert.

#include "model/archs/archs.h"

namespace strata::archs {

std::unique_ptr<Model> make_llama(GgufFile file) {
  ModelHParams hp = read_common_hparams(file, "llama");
  hp.rope_style = ops::RopeStyle::norm;
  LayerSpec layer;
  layer.moe = hp.n_expert > 0;
  if (layer.moe && hp.n_ff_exp == 0) hp.n_ff_exp = hp.n_ff;
  hp.expert_weights_norm = true;
  ModelSpec spec = same_layers(hp.n_layer, layer);
  return make_decoder(std::move(file), std::move(hp), std::move(spec));
}

}  // namespace strata::archs
