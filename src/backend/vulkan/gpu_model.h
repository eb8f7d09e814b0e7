#pragma once
// Loading a model onto Vulkan devices (--device), whole or as a hybrid plan says: each layer's
// attention, norms, router and shared expert on the GPU, each routed expert on the GPU or in RAM
// (computed by the CPU during the step, overlapped with the GPU's work).

#include <memory>
#include <string>
#include <vector>

#include "backend/vulkan/cpu_experts.h"
#include "backend/vulkan/device.h"
#include "model/model.h"
#include "plan/cost_model.h"

namespace strata::vk {

// Loads `path` (mapped, not read into RAM: the weights go straight to the devices) onto
// `devices` (indices as in `strata devices`; one named twice opens that GPU twice, as two
// logical devices). Throws strata::Error naming the model, the device and what does not fit or
// is not supported.
// memory_limit: --vram-budget in bytes, for each device (0: the device's own free memory).
// placement: where the plan keeps each part (device d = devices[d - 1]); null: all on the
// first device.
std::unique_ptr<Model> load_gpu_model(const std::string& path, const std::vector<int>& devices,
                                      uint64_t memory_limit = 0,
                                      const plan::Placement* placement = nullptr);
// What each of `devices` may hold: memory_limit (--vram-budget) when given, else the GPU's free
// memory, shared equally by the openings of a GPU named more than once; 0 for a CPU-type device
// (not limited).
std::vector<uint64_t> device_budgets(const std::vector<int>& devices, uint64_t memory_limit);
// The same on devices already open (their compiled kernels are reused).
std::unique_ptr<Model> load_gpu_model(const std::string& path,
                                      std::vector<std::shared_ptr<Device>> devices,
                                      const plan::Placement* placement = nullptr);
std::unique_ptr<Model> load_gpu_model(const std::string& path, std::shared_ptr<Device> device,
                                      const plan::Placement* placement = nullptr);

// The (first) device `model` runs on, or null for a CPU model (for bench output and probes).
Device* gpu_device(Model& model);
// How many of `model`'s steps had to be encoded into a Vulkan command buffer (the others
// replayed the last one: CommandList); -1 for a CPU model.
int64_t gpu_step_encodings(const Model& model);
// What the CPU did during `model`'s last step (experts in RAM); null for a CPU model.
const HybridTimeline* hybrid_timeline(const Model& model);
// Times every GPU segment of the following steps with timestamp queries (the timeline's
// segments), on devices that have them; false for a CPU model.
bool set_gpu_timestamps(Model& model, bool on);

// One line describing what a placement keeps where (device_labels[d - 1] names plan device d),
// e.g. "attention, routers and shared experts of layers 0-23 on vk0, layers 24-47 on vk1; 40
// layers' experts whole on their GPU, ...; 120 experts (1.52 GiB) in RAM computed by the CPU".
// bytes_per_expert: one routed expert of one layer (Model::expert_bytes).
std::string describe_placement(const plan::Placement& placement, const ModelHParams& hp,
                               const std::vector<std::string>& device_labels,
                               uint64_t bytes_per_expert);

}  // namespace strata::vk
