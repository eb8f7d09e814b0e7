#pragma once
// The tensors a GGUF file of a published architecture holds (names, roles, sizes), from its
// shapes alone: what inventory_from_architecture prices at a quantization's bytes.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"
#include "model/tensor_role.h"
#include "plan/architecture_presets.h"

namespace strata::plan {

struct ArchitectureTensor {
  std::string name;
  TensorRole role = TensorRole::other;
  int layer = -1;  // -1: outside the blocks; n_layer and up: NextN blocks (never run)
  int64_t elements = 0;
  int n_dims = 1;
  int64_t row_length = 0;  // the shape's first dimension
  bool matrix = false;     // one matrix product per token (not norms, biases, sinks, convs)
  bool quantized = false;  // takes the quantization's bits; else f32, or fixed_type
  std::optional<GgmlType> fixed_type;  // kept in this type whatever the quantization (MXFP4)
};

std::vector<ArchitectureTensor> architecture_tensors(const ArchitectureSpec& spec);

}  // namespace strata::plan
