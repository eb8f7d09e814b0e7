#pragma once
// One factory per architecture (one file each); model.cpp maps general.architecture to them.

#include <memory>

#include "model/layer_spec.h"
#include "model/model.h"

namespace strata::archs {

// n_layer copies of `layer` (then varied per layer by the caller).
ModelSpec same_layers(int64_t n_layer, const LayerSpec& layer);
// The decoder of `spec` over `file`.
std::unique_ptr<Model> make_decoder(GgufFile file, ModelHParams hp, ModelSpec spec);

std::unique_ptr<Model> make_qwen3moe(GgufFile file);
std::unique_ptr<Model> make_qwen35moe(GgufFile file);
std::unique_ptr<Model> make_qwen3(GgufFile file);
std::unique_ptr<Model> make_llama(GgufFile file);
std::unique_ptr<Model> make_gpt_oss(GgufFile file);
std::unique_ptr<Model> make_glm4moe(GgufFile file);
std::unique_ptr<Model> make_qwen3next(GgufFile file);

}  // namespace strata::archs
