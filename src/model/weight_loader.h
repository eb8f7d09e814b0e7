#pragma once
// Declares the tensors an architecture needs, with their expected shapes, and checks them
// against the file: a missing tensor, a wrong shape or an unsupported type is an error that
// names the tensor, what was expected and what was found.

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <string>
#include <unordered_set>
#include <vector>

#include "gguf/gguf_file.h"
#include "ops/matmul.h"

namespace strata {

class WeightLoader {
 public:
  explicit WeightLoader(const GgufFile& file) : file_(file) {}

  // A 2-D weight matrix: GGUF shape {cols, rows}.
  ops::WeightMatrix matrix(const std::string& name, int64_t cols, int64_t rows);
  // Same, or an empty matrix (data == nullptr) when the file does not have it.
  ops::WeightMatrix optional_matrix(const std::string& name, int64_t cols, int64_t rows);
  // A stack of expert matrices: GGUF shape {cols, rows, n_expert}, as one matrix of
  // rows * n_expert rows (expert e is slice(e * rows, rows)).
  ops::WeightMatrix experts(const std::string& name, int64_t cols, int64_t rows, int64_t n_expert);
  // A vector of floats (norm weights): zero-copy for F32, converted once otherwise.
  const float* vector(const std::string& name, int64_t n);
  const float* optional_vector(const std::string& name, int64_t n);
  // Any small tensor of the given GGUF shape as floats (e.g. convolution kernels).
  const float* floats(const std::string& name, std::initializer_list<int64_t> shape);

  // Tensors in the file that no declaration used (warned about by the caller).
  std::vector<std::string> unused() const;
  // The float copies of non-F32 vectors vector() and floats() returned: whoever keeps those
  // pointers keeps these (the loader itself lives only while a model is built).
  std::deque<std::vector<float>> take_converted() { return std::move(converted_); }

 private:
  const GgufTensorInfo& find(const std::string& name, std::initializer_list<int64_t> shape);
  ops::WeightMatrix as_matrix(const GgufTensorInfo& t, int64_t cols, int64_t rows);

  const GgufFile& file_;
  std::unordered_set<std::string> used_;
  std::deque<std::vector<float>> converted_;  // owned copies of non-F32 vectors (stable addresses)
};

}  // namespace strata
