// qwen3 (dense Qwen3): pre-norm decoder, GQA with per-head q/k RMSNorm, NEOX RoPE, SwiGLU FFN.

#include "model/archs/archs.h"
#include "model/standard_decoder.h"

namespace strata::archs {

std::unique_ptr<Model> make_qwen3(GgufFile file) {
  ModelHParams hp = read_common_hparams(file, "qwen3");
  hp.rope_style = ops::RopeStyle::neox;
  StandardDecoder::Options o;
  o.attention.qk_norm = AttentionLayout::QkNorm::required;
  return std::make_unique<StandardDecoder>(std::move(file), std::move(hp), std::move(o));
}

}  // namespace strata::archs
