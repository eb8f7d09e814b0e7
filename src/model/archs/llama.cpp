// llama: pre-norm decoder, GQA without q/k norms, NORM-style RoPE (adjacent pairs) over
// rope.dimension_count dims, SwiGLU FFN, output tied to token_embd when output.weight is absent.

#include "model/archs/archs.h"
#include "model/standard_decoder.h"

namespace strata::archs {

std::unique_ptr<Model> make_llama(GgufFile file) {
  ModelHParams hp = read_common_hparams(file, "llama");
  hp.rope_style = ops::RopeStyle::norm;
  return std::make_unique<StandardDecoder>(
      std::move(file), std::move(hp), StandardDecoder::Options{.qk_norm = false, .moe = false});
}

}  // namespace strata::archs
