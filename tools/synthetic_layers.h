#pragma once
// The tensors of one block of a synthetic model, named and shaped as the loaders in
// src/model/archs expect them for the spec's architecture.

#include <cstdint>

#include "gguf/gguf_writer.h"
#include "synthetic_model.h"
#include "synthetic_weights.h"

namespace strata::tools {

// Gated DeltaNet hybrids: qwen35moe, qwen3next.
bool is_hybrid(const SyntheticModelSpec& s);
// Whether block `layer` has a routed-expert FFN.
bool has_experts(const SyntheticModelSpec& s, int64_t layer);

void add_block_tensors(const SyntheticModelSpec& s, RandomWeights& weights, GgufWriter& w,
                       int64_t layer);
// A NextN block (glm4moe): the layer's tensors and the projection of [embedding, hidden state]
// with its norms.
void add_nextn_block_tensors(const SyntheticModelSpec& s, RandomWeights& weights, GgufWriter& w,
                             int64_t layer);

}  // namespace strata::tools
