#include "model/weight_loader.h"

#include <fmt/format.h>

#include "quant/quant.h"
#include "util/error.h"

namespace strata {

const GgufTensorInfo& WeightLoader::find(const std::string& name,
                                         std::initializer_list<int64_t> shape) {
  const GgufTensorInfo* t = file_.find_tensor(name);
  const std::string expected = fmt::format("[{}]", fmt::join(shape, ", "));
  if (!t) fail("{}: tensor '{}' is missing (expected shape {})", file_.name(), name, expected);
  // Trailing dimensions of 1 are equivalent (GGUF writers differ in whether they keep them).
  std::vector<int64_t> actual = t->shape;
  while (actual.size() > shape.size() && actual.back() == 1) actual.pop_back();
  if (actual != std::vector<int64_t>(shape)) {
    fail("{}: tensor '{}' has shape {}, expected {}", file_.name(), name, t->shape_string(),
         expected);
  }
  if (!quant::is_supported(t->type)) {
    fail("{}: tensor '{}' has type {}, which strata cannot compute with ({})", file_.name(), name,
         ggml_type_name(t->type), [&] {
           try {
             quant::traits(t->type);
           } catch (const Error& e) {
             return std::string(e.what());
           }
           return std::string();
         }());
  }
  used_.insert(name);
  return *t;
}

ops::WeightMatrix WeightLoader::as_matrix(const GgufTensorInfo& t, int64_t cols, int64_t rows) {
  const quant::TypeTraits& traits = quant::traits(t.type);
  if (!traits.kernels.vec_dot) {
    fail("{}: tensor '{}' has type {}, which is an activation format, not a weight format",
         file_.name(), t.name, traits.name);
  }
  return {t.type, t.data.data(), cols, rows, quant::row_bytes(t.type, cols)};
}

ops::WeightMatrix WeightLoader::matrix(const std::string& name, int64_t cols, int64_t rows) {
  return as_matrix(find(name, {cols, rows}), cols, rows);
}

ops::WeightMatrix WeightLoader::optional_matrix(const std::string& name, int64_t cols,
                                                int64_t rows) {
  if (!file_.find_tensor(name)) return {};
  return matrix(name, cols, rows);
}

ops::WeightMatrix WeightLoader::experts(const std::string& name, int64_t cols, int64_t rows,
                                        int64_t n_expert) {
  return as_matrix(find(name, {cols, rows, n_expert}), cols, rows * n_expert);
}

const float* WeightLoader::vector(const std::string& name, int64_t n) {
  const GgufTensorInfo& t = find(name, {n});
  if (t.type == GgmlType::F32) return reinterpret_cast<const float*>(t.data.data());
  std::vector<float>& out = converted_.emplace_back(static_cast<size_t>(n));
  quant::traits(t.type).kernels.dequantize_row(t.data.data(), out.data(), n);
  return out.data();
}

const float* WeightLoader::floats(const std::string& name, std::initializer_list<int64_t> shape) {
  const GgufTensorInfo& t = find(name, shape);
  if (t.type == GgmlType::F32) return reinterpret_cast<const float*>(t.data.data());
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float>& out = converted_.emplace_back(static_cast<size_t>(n));
  quant::traits(t.type).kernels.dequantize_row(t.data.data(), out.data(), n);
  return out.data();
}

const float* WeightLoader::optional_vector(const std::string& name, int64_t n) {
  return file_.find_tensor(name) ? vector(name, n) : nullptr;
}

std::vector<std::string> WeightLoader::unused() const {
  std::vector<std::string> out;
  for (const auto& t : file_.tensors()) {
    if (!used_.count(t.name)) out.push_back(t.name);
  }
  return out;
}

}  // namespace strata
