// glm4moe (GLM-4.5, GLM-4.6, GLM-4.5-Air): pre-norm decoder; the first
// leading_dense_block_count layers have a dense SwiGLU FFN, the others a MoE with one shared
// expert (added ungated). Routing is per-expert sigmoid: the experts are chosen by score plus the
// score-correction bias (exp_probs_b), weighted by their unbiased scores, normalized, times
// expert_weights_scale. Attention has q/k/v biases, optional per-head q/k RMSNorm (absent in
// GLM-4.5-Air), and NEOX RoPE on the first rope.dimension_count dims of each head. The NextN
// (multi-token prediction) block at the end (nextn_predict_layers) is not loaded.

#include "model/archs/archs.h"
#include "util/error.h"

namespace strata::archs {

std::unique_ptr<Model> make_glm4moe(GgufFile file) {
  const std::string arch = "glm4moe";
  ModelHParams hp = read_common_hparams(file, arch);
  hp.rope_style = ops::RopeStyle::neox;
  STRATA_CHECK(hp.n_expert > 0, "{}: {}.expert_count is missing: glm4moe is a MoE model",
               file.name(), arch);
  const int64_t nextn = file.find_int(arch + ".nextn_predict_layers").value_or(0);
  STRATA_CHECK(nextn >= 0 && nextn < hp.n_layer, "{}: {}.nextn_predict_layers is {} of {} blocks",
               file.name(), arch, nextn, hp.n_layer);
  hp.n_layer -= nextn;
  hp.expert_weights_norm = file.find_bool(arch + ".expert_weights_norm").value_or(false);
  hp.expert_weights_scale =
      static_cast<float>(file.find_float(arch + ".expert_weights_scale").value_or(1.0));
  const int64_t gating = file.find_int(arch + ".expert_gating_func").value_or(2);
  STRATA_CHECK(gating == 1 || gating == 2,
               "{}: {}.expert_gating_func is {}, expected 1 (softmax) or 2 (sigmoid)", file.name(),
               arch, gating);
  hp.expert_gating = gating == 2 ? ExpertGating::sigmoid : ExpertGating::softmax;

  LayerSpec layer;
  layer.attention.qk_norm = AttentionLayout::QkNorm::optional;
  layer.attention.qkv_bias = true;
  layer.moe = true;
  const int64_t shared = file.find_int(arch + ".expert_shared_count").value_or(0);
  STRATA_CHECK(shared >= 0, "{}: {}.expert_shared_count is {}", file.name(), arch, shared);
  layer.moe_layout.selection_bias = hp.expert_gating == ExpertGating::sigmoid;
  layer.moe_layout.n_ff_shexp = shared * hp.n_ff_exp;
  layer.post_attention_norm = true;
  ModelSpec spec = same_layers(hp.n_layer, layer);
  const int64_t leading_dense = file.find_int(arch + ".leading_dense_block_count").value_or(0);
  STRATA_CHECK(leading_dense >= 0 && leading_dense <= hp.n_layer,
               "{}: {}.leading_dense_block_count is {} of {} layers", file.name(), hp.arch,
               leading_dense, hp.n_layer);
  for (int64_t il = 0; il < leading_dense; ++il) spec.layers[static_cast<size_t>(il)].moe = false;
  spec.skipped_layers = nextn;
  return make_decoder(std::move(file), std::move(hp), std::move(spec));
}

}  // namespace strata::archs
