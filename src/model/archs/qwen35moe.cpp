// qwen35moe (Qwen3.5/3.6-35B-A3B): hybrid decoder, three Gated DeltaNet layers to one gated
// full-attention layer (full_attention_interval 4), every layer a MoE FFN (softmax top-k,
// renormalized) plus a sigmoid-gated shared expert. Attention: query + gate per head, per-head
// q/k RMSNorm, partial RoPE (IMROPE sections, which for text reduce to NEOX on the first
// rope.dimension_count dims). Value head h of a GDN layer reads k-head h mod H_k (the converter
// reorders the heads). Norm weights are stored as w + 1 by the converter and used as stored.
// The multi-token-prediction block (nextn_predict_layers) is not loaded.

#include "model/archs/archs.h"
#include "model/archs/hybrid_spec.h"

namespace strata::archs {

std::unique_ptr<Model> make_qwen35moe(GgufFile file) {
  const std::string arch = "qwen35moe";
  ModelHParams hp = read_common_hparams(file, arch);
  hp.rope_style = ops::RopeStyle::neox;
  hp.expert_weights_norm = true;
  ModelSpec spec = read_hybrid_spec(file, arch, hp);
  spec.gdn.k_head_modulo = true;
  spec.projections = GdnProjections::separate;
  return make_decoder(std::move(file), std::move(hp), std::move(spec));
}

}  // namespace strata::archs
