#pragma once
// One f32 input of several products (q/k/v share the normed states, gate/up share them too),
// rounded once per partner format of the weights that read it, as the CPU's ActivationCache
// quantizes it once per type: the GPU then computes the CPU's products (up to summation order).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backend/vulkan/gpu_ops.h"

namespace strata::vk {

// Scratch buffers of one input slot, one per partner format, grown on demand.
class ActivationScratch {
 public:
  ActivationScratch(Device& device, std::string what) : device_(device), what_(std::move(what)) {}
  // A buffer of at least `floats` floats for activations rounded to `partner`.
  uint64_t buffer(GgmlType partner, uint64_t floats);
  // Frees buffers replaced by larger ones (call when no recorded work reads them any more).
  void release_retired() { retired_.clear(); }

 private:
  Device& device_;
  std::string what_;
  std::map<GgmlType, Buffer> buffers_;
  std::vector<Buffer> retired_;
};

struct RoundedRows {
  uint64_t address = 0;
  int64_t stride = 0;  // floats between rows
};

class ActivationInput {
 public:
  ActivationInput(GpuOps& ops, ActivationScratch& scratch, uint64_t x, int64_t stride, int64_t rows,
                  int64_t cols)
      : ops_(ops), scratch_(scratch), x_{x, stride}, rows_(rows), cols_(cols) {}

  // The input as weights of `weight_type` must see it (recorded on first use per partner).
  RoundedRows for_weights(GgmlType weight_type);

 private:
  GpuOps& ops_;
  ActivationScratch& scratch_;
  RoundedRows x_;
  int64_t rows_, cols_;
  std::map<GgmlType, RoundedRows> rounded_;
};

}  // namespace strata::vk
