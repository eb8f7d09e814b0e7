// gpt-oss (gpt-oss-20b, gpt-oss-120b): pre-norm decoder whose layers alternate sliding-window
// attention (even layers: ModelHParams::layer_window) and full attention, both with biases on
// q/k/v/o and one attention-sink logit per head; NEOX RoPE over the whole head with YaRN scaling.
// Every FFN is a MoE: a biased router, top-k of the logits weighted by the softmax over the chosen
// ones (the same as softmax then renormalize), experts with biases and the clamped SwiGLU
// (alpha 1.702, limit 7, up + 1). The pre-FFN norm is called post_attention_norm. Published files
// keep the experts in MXFP4.

#include "model/archs/archs.h"
#include "util/error.h"

namespace strata::archs {

std::unique_ptr<Model> make_gpt_oss(GgufFile file) {
  const std::string arch = "gpt-oss";
  ModelHParams hp = read_common_hparams(file, arch);
  hp.rope_style = ops::RopeStyle::neox;
  hp.expert_weights_norm = true;
  hp.expert_activation = ExpertActivation::swiglu_oai;
  STRATA_CHECK(hp.n_expert > 0, "{}: {}.expert_count is missing: gpt-oss is a MoE model",
               file.name(), arch);
  const std::string window_key = arch + ".attention.sliding_window";
  hp.sliding_window = file.get_int(window_key);
  STRATA_CHECK(hp.sliding_window > 0, "{}: {} must be positive, found {}", file.name(), window_key,
               hp.sliding_window);

  LayerSpec layer;
  layer.attention.qkv_bias = layer.attention.output_bias = layer.attention.sinks = true;
  layer.moe = true;
  layer.moe_layout.router_bias = layer.moe_layout.expert_biases = true;
  layer.post_attention_norm = true;
  ModelSpec spec = same_layers(hp.n_layer, layer);
  for (int64_t il = 0; il < hp.n_layer; ++il)
    spec.layers[static_cast<size_t>(il)].window = hp.layer_window(il);
  return make_decoder(std::move(file), std::move(hp), std::move(spec));
}

}  // namespace strata::archs
