// qwen3moe (Qwen3-30B-A3B, Qwen3-Coder-30B-A3B, Qwen3-235B-A22B): pre-norm decoder, GQA with
// per-head q/k RMSNorm, NEOX RoPE, softmax router over all experts, top-k renormalized, SwiGLU
// experts, no shared expert.

#include "model/archs/archs.h"
#include "model/standard_decoder.h"

namespace strata::archs {

std::unique_ptr<Model> make_qwen3moe(GgufFile file) {
  ModelHParams hp = read_common_hparams(file, "qwen3moe");
  hp.rope_style = ops::RopeStyle::neox;
  hp.expert_weights_norm = true;
  StandardDecoder::Options o;
  o.attention.qk_norm = AttentionLayout::QkNorm::required;
  o.moe = true;
  return std::make_unique<StandardDecoder>(std::move(file), std::move(hp), std::move(o));
}

}  // namespace strata::archs
