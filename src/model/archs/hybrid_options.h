#pragma once
// What the Qwen hybrid architectures (qwen35moe, qwen3next) read alike: the Gated DeltaNet
// sizes, the shared expert width, which layers are recurrent, and the skipped MTP block.

#include <string>

#include "model/hybrid_decoder.h"

namespace strata::archs {

// Reads "{arch}.ssm.*", expert_shared_feed_forward_length, attention.recurrent_layers or
// full_attention_interval, and nextn_predict_layers (removed from hp.n_layer).
HybridDecoder::Options read_hybrid_options(const GgufFile& file, const std::string& arch,
                                           ModelHParams& hp);

}  // namespace strata::archs
