// qwen3next (Qwen3-Next-80B-A3B): the Qwen hybrid decoder (see qwen35moe) with its own layout.
// Differences from qwen35moe: value head h of a Gated DeltaNet layer reads key head
// h / (n_v_heads / n_k_heads) (heads grouped, not tiled); beta and alpha come from one fused
// ssm_ba projection grouped by key head; plain NEOX partial rotary (no M-RoPE sections). Files
// converted before 2026 fuse q, k, v and z as well (ssm_in, grouped by key head); both load.

#include "model/archs/archs.h"
#include "model/archs/hybrid_options.h"

namespace strata::archs {

std::unique_ptr<Model> make_qwen3next(GgufFile file) {
  const std::string arch = "qwen3next";
  ModelHParams hp = read_common_hparams(file, arch);
  hp.rope_style = ops::RopeStyle::neox;
  hp.expert_weights_norm = true;
  HybridDecoder::Options o = read_hybrid_options(file, arch, hp);
  o.gdn.k_head_modulo = false;
  using Projections = HybridDecoder::Options::GdnProjections;
  o.projections = Projections::fused_ba;
  for (size_t il = 0; il < o.recurrent.size(); ++il) {
    if (!o.recurrent[il]) continue;
    if (file.find_tensor("blk." + std::to_string(il) + ".ssm_in.weight")) {
      o.projections = Projections::fused_in;
    }
    break;  // the first recurrent layer tells the layout of all
  }
  return std::make_unique<HybridDecoder>(std::move(file), std::move(hp), std::move(o));
}

}  // namespace strata::archs
