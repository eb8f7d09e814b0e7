// qwen3next (Qwen3-Next-80B-A3B): the Qwen hybrid decoder (see qwen35moe) with its own layout.
// Differences from qwen35moe: value head h of a Gated DeltaNet layer reads key head
// h / (n_v_heads / n_k_heads) (heads grouped, not tiled); beta and alpha come from one fused
// ssm_ba projection grouped by key head; plain NEOX partial rotary (no M-RoPE sections). Files
// converted before 2026 fuse q, k, v and z as well (ssm_in, grouped by key head); both load.

#include "model/archs/archs.h"
#include "model/archs/hybrid_spec.h"

namespace strata::archs {

std::unique_ptr<Model> make_qwen3next(GgufFile file) {
  const std::string arch = "qwen3next";
  ModelHParams hp = read_common_hparams(file, arch);
  hp.rope_style = ops::RopeStyle::neox;
  hp.expert_weights_norm = true;
  ModelSpec spec = read_hybrid_spec(file, arch, hp);
  spec.gdn.k_head_modulo = false;
  spec.projections = GdnProjections::fused_ba;
  for (size_t il = 0; il < spec.layers.size(); ++il) {
    if (!spec.layers[il].recurrent()) continue;
    if (file.find_tensor(layer_tensor_name(LayerTensor::gdn_in, static_cast<int64_t>(il)))) {
      spec.projections = GdnProjections::fused_in;
    }
    break;  // the first recurrent layer tells the layout of all
  }
  return make_decoder(std::move(file), std::move(hp), std::move(spec));
}

}  // namespace strata::archs
