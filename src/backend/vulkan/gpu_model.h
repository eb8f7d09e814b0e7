#pragma once
// Loading a model onto Vulkan devices (--device). One device runs the whole model for now;
// plans that split a model across the CPU and GPUs are the hybrid executor's.

#include <memory>
#include <string>
#include <vector>

#include "backend/vulkan/device.h"
#include "model/model.h"

namespace strata::vk {

// Loads `path` (mapped, not read into RAM: the weights go straight to the device) onto the
// first of `devices` (indices as in `strata devices`). Throws strata::Error naming the model,
// the device and what does not fit or is not supported.
// memory_limit: --vram-budget in bytes (0: the device's own free memory).
std::unique_ptr<Model> load_gpu_model(const std::string& path, const std::vector<int>& devices,
                                      uint64_t memory_limit = 0);
// The same on a device already open (its compiled kernels are reused).
std::unique_ptr<Model> load_gpu_model(const std::string& path, std::shared_ptr<Device> device);

// The device `model` runs on, or null for a CPU model (for bench output and probes).
Device* gpu_device(Model& model);
// How many of `model`'s steps had to be encoded into a Vulkan command buffer (the others
// replayed the last one: CommandList); -1 for a CPU model.
int64_t gpu_step_encodings(const Model& model);

}  // namespace strata::vk
