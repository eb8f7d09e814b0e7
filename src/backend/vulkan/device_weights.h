#pragma once
// A model's weights on one device: tensors packed into a few large allocations (drivers limit
// the number of allocations) and uploaded once through the staging ring, with a progress line
// on stderr (bytes, GB/s).

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/vulkan/device.h"
#include "backend/vulkan/gpu_ops.h"
#include "ops/matmul.h"

namespace strata::vk {

class DeviceWeights {
 public:
  // total_bytes: what will be uploaded (for the progress line and to fail early, before any
  // upload, when it cannot fit).
  DeviceWeights(Device& device, uint64_t total_bytes);
  ~DeviceWeights();

  // Uploads a matrix; `name` appears in errors (out of memory, unsupported type).
  GpuMatrix matrix(const ops::WeightMatrix& w, const std::string& name);
  // Uploads n floats (norm weights); returns the device address (0 for null).
  uint64_t floats(const float* data, int64_t n, const std::string& name);
  // Uploads n 32-bit integers (an expert slot map); returns the device address.
  uint64_t ints(const int32_t* data, int64_t n, const std::string& name);
  // Uploads the experts `experts` of a stack of experts of `rows` rows each (stack.rows a
  // multiple), one after another: slot i holds expert experts[i]. Describes one expert, as the
  // expert kernels expect.
  GpuMatrix experts(const ops::WeightMatrix& stack, int64_t rows, std::span<const int32_t> experts,
                    const std::string& name);

  uint64_t bytes() const { return used_; }

  // A host-visible buffer of `bytes` kept with the weights (a layer's RAM experts, which the CPU
  // computes from and the GPU copies from); null when the driver refuses it. The first refusal is
  // logged; later calls then return null without asking.
  const Buffer* pinned(uint64_t bytes, const std::string& what);
  uint64_t pinned_bytes() const { return pinned_bytes_; }

 private:
  uint64_t place(const void* data, uint64_t bytes, const std::string& name);
  // Room for `bytes` (aligned) in a chunk: the buffer and the offset there.
  std::pair<const Buffer*, uint64_t> reserve(uint64_t bytes, const std::string& name);
  void uploaded(uint64_t bytes);
  void report(bool final);

  Device& device_;
  uint64_t total_ = 0, used_ = 0;
  std::vector<Buffer> chunks_;
  std::vector<std::unique_ptr<Buffer>> pinned_;  // stable addresses: layers point at them
  uint64_t pinned_bytes_ = 0;
  bool pinning_refused_ = false;
  uint64_t chunk_used_ = 0;
  uint64_t chunked_ = 0;  // bytes of all chunks allocated so far
  double start_ = 0, last_report_ = 0;
  bool tty_ = false, reported_final_ = false;
};

// Sum of the bytes DeviceWeights will place for these matrices and vectors (with alignment).
uint64_t aligned_bytes(uint64_t bytes);
// What matrix() / floats() place for w / n floats (0 for an absent tensor), to size the upload.
inline uint64_t upload_bytes(const ops::WeightMatrix& w) {
  return w.data ? aligned_bytes(static_cast<uint64_t>(w.bytes())) : 0;
}
inline uint64_t upload_bytes(const float* v, int64_t n) {
  return v ? aligned_bytes(static_cast<uint64_t>(n) * 4) : 0;
}
// What experts() places for `count` experts of `rows` rows of stack w.
inline uint64_t upload_bytes(const ops::WeightMatrix& w, int64_t rows, int64_t count) {
  return w.data && count ? aligned_bytes(static_cast<uint64_t>(rows * count * w.row_bytes)) : 0;
}

}  // namespace strata::vk
