#pragma once
// What the Qwen hybrid architectures (qwen35moe, qwen3next) read alike: the Gated DeltaNet
// sizes, the shared expert width, which layers are recurrent, and the skipped MTP block.

#include <string>

#include "gguf/gguf_file.h"
#include "model/hparams.h"
#include "model/layer_spec.h"

namespace strata::archs {

// The layers of a Qwen hybrid: Gated DeltaNet ("{arch}.ssm.*") where attention.recurrent_layers
// or full_attention_interval says, gated full attention with per-head q/k norms elsewhere, each
// with a MoE FFN plus a sigmoid-gated shared expert (expert_shared_feed_forward_length) after a
// post_attention_norm; nextn_predict_layers is removed from hp.n_layer and skipped.
ModelSpec read_hybrid_spec(const GgufFile& file, const std::string& arch, ModelHParams& hp);

}  // namespace strata::archs
