#pragma once
// A step's token embeddings: looked up on the device (get_rows), or, when the plan keeps
// token_embd in RAM (llama.cpp does too: a token reads one row of it), looked up by the host
// into host-visible memory and copied in by the step.

#include <cstdint>
#include <span>

#include "backend/vulkan/device.h"
#include "backend/vulkan/gpu_ops.h"
#include "ops/matmul.h"

namespace strata::vk {

class GpuEmbeddings {
 public:
  // on_device: the uploaded table (address 0: in RAM, read from `table`).
  GpuEmbeddings(Device& device, const ops::WeightMatrix& table, GpuMatrix on_device)
      : device_(device), table_(table), on_device_(on_device) {}

  bool in_ram() const { return on_device_.address == 0; }
  // x[t] = row tokens[t] (token_ids: the same ids in device-visible memory).
  void record(GpuOps& ops, std::span<const int32_t> tokens, uint64_t token_ids, const Buffer& x);

 private:
  Device& device_;
  ops::WeightMatrix table_;
  GpuMatrix on_device_;
  int64_t tokens_ = 0;
  Buffer rows_;  // host-visible [tokens_][n_embd]
};

}  // namespace strata::vk
