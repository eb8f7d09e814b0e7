// gpt-oss (gpt-oss-20b, gpt-oss-120b): pre-norm decoder whose layers alternate sliding-window
// attention (even layers: ModelHParams::layer_window) and full attention, both with biases on
// q/k/v/o and one attention-sink logit per head; NEOX RoPE over the whole head with YaRN scaling.
// Every FFN is a MoE: a biased router, top-k of the logits weighted by the softmax over the chosen
// ones (the same as softmax then renormalize), experts with biases and the clamped SwiGLU
// (alpha 1.702, limit 7, up + 1). The pre-FFN norm is called post_attention_norm. Published files
// keep the experts in MXFP4.

#include "model/archs/archs.h"
#include "model/standard_decoder.h"
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

  StandardDecoder::Options o;
  o.attention.qkv_bias = o.attention.output_bias = o.attention.sinks = true;
  o.moe = true;
  o.moe_layout.router_bias = o.moe_layout.expert_biases = true;
  o.ffn_norm = "post_attention_norm";
  return std::make_unique<StandardDecoder>(std::move(file), std::move(hp), std::move(o));
}

}  // namespace strata::archs
