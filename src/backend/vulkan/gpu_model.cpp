#include "backend/vulkan/gpu_model.h"

#include "backend/vulkan/gpu_hybrid_decoder.h"
#include "backend/vulkan/gpu_standard_decoder.h"
#include "util/error.h"
#include "util/log.h"

namespace strata::vk {

std::unique_ptr<Model> load_gpu_model(const std::string& path, const std::vector<int>& devices,
                                      uint64_t memory_limit) {
  STRATA_CHECK(!devices.empty(), "load_gpu_model: no device given");
  if (devices.size() > 1) {
    log::warn(
        "--device: {} devices given; this version runs a model on one device (vk{}), "
        "splitting across devices comes with hybrid plans",
        devices.size(), devices[0]);
  }
  const DeviceInfo& info = Instance::get().devices().at(static_cast<size_t>(devices[0]));
  auto device = std::make_shared<Device>(info);
  device->set_memory_limit(memory_limit);
  return load_gpu_model(path, std::move(device));
}

std::unique_ptr<Model> load_gpu_model(const std::string& path, std::shared_ptr<Device> device) {
  std::unique_ptr<Model> cpu = Model::load(path, LoadMode::mmap);
  if (auto* hybrid = dynamic_cast<HybridDecoder*>(cpu.get())) {
    log::info("running {} on {}", path, device->label());
    cpu.release();
    return std::make_unique<GpuHybridDecoder>(std::unique_ptr<HybridDecoder>(hybrid),
                                              std::move(device));
  }
  auto* standard = dynamic_cast<StandardDecoder*>(cpu.get());
  STRATA_CHECK(standard,
               "{}: architecture '{}' has no GPU path yet (supported on the GPU: "
               "qwen35moe, qwen3moe, qwen3, llama); run it with --device none",
               path, cpu->hparams().arch);
  log::info("running {} on {}", path, device->label());
  cpu.release();
  return std::make_unique<GpuStandardDecoder>(std::unique_ptr<StandardDecoder>(standard),
                                              std::move(device));
}

int64_t gpu_step_encodings(const Model& model) {
  if (auto* standard = dynamic_cast<const GpuStandardDecoder*>(&model))
    return standard->step_encodings();
  if (auto* hybrid = dynamic_cast<const GpuHybridDecoder*>(&model)) return hybrid->step_encodings();
  return -1;
}

Device* gpu_device(Model& model) {
  if (auto* standard = dynamic_cast<GpuStandardDecoder*>(&model)) return &standard->device();
  if (auto* hybrid = dynamic_cast<GpuHybridDecoder*>(&model)) return &hybrid->device();
  return nullptr;
}

}  // namespace strata::vk
