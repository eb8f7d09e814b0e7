#pragma once
// One factory per architecture (one file each); model.cpp maps general.architecture to them.

#include <memory>

#include "model/model.h"

namespace strata::archs {

std::unique_ptr<Model> make_qwen3moe(GgufFile file);
std::unique_ptr<Model> make_qwen35moe(GgufFile file);
std::unique_ptr<Model> make_qwen3(GgufFile file);
std::unique_ptr<Model> make_llama(GgufFile file);
std::unique_ptr<Model> make_gpt_oss(GgufFile file);
std::unique_ptr<Model> make_glm4moe(GgufFile file);
std::unique_ptr<Model> make_qwen3next(GgufFile file);

}  // namespace strata::archs
