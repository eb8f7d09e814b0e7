#pragma once
// What enters the weight matrices of the CPU blocks, for whoever wants to see it: `strata
// imatrix` sums the squares of every column of the rows each matrix multiplies (the importance a
// quantizer gives that column's weights). Set on a model with Model::set_activation_observer; the
// blocks call it on their own thread, before each product.

#include <cstdint>

namespace strata {

class ActivationObserver {
 public:
  virtual ~ActivationObserver() = default;
  // `rows` rows of `cols` floats (row i at x + i * cols) multiply the matrix whose data starts at
  // `weights`.
  virtual void dense(const void* weights, const float* x, int64_t rows, int64_t cols) = 0;
  // Rows x + ids[i] * cols, i < count, multiply expert `expert` of the stacked expert tensor
  // whose data starts at `weights`.
  virtual void expert(const void* weights, int64_t expert, const float* x, const int32_t* ids,
                      int64_t count, int64_t cols) = 0;
};

}  // namespace strata
