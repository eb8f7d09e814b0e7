#include "backend/vulkan/gpu_model.h"

#include "backend/vulkan/gpu_hybrid_decoder.h"
#include "backend/vulkan/gpu_standard_decoder.h"
#include "util/error.h"
#include "util/format_bytes.h"
#include "util/log.h"

namespace strata::vk {
namespace {

constexpr int kGpuDevice = 1;  // the plan's first GPU: the device the model is loaded on

// The routed experts each layer keeps on the device, checked against what this executor runs:
// attention and the output head on the GPU, experts on the GPU or in RAM, one GPU.
ExpertPlacement experts_from_plan(const plan::Placement& p, const ModelHParams& hp,
                                  const std::string& path) {
  STRATA_CHECK(static_cast<int64_t>(p.layers.size()) == hp.n_layer,
               "{}: the plan places {} layers but the model has {}", path, p.layers.size(),
               hp.n_layer);
  const auto device_word = [](int d) {
    return d == plan::kCpuDevice ? std::string("the CPU") : fmt::format("GPU{}", d - 1);
  };
  STRATA_CHECK(p.output_device == kGpuDevice,
               "{}: the plan keeps the output head on {}; this strata runs it on the GPU (give "
               "it more --vram-budget or fewer layers' experts on the GPU)",
               path, device_word(p.output_device));
  STRATA_CHECK(p.embeddings_device == kGpuDevice || p.embeddings_device == plan::kCpuDevice,
               "{}: the plan keeps the token embeddings on {}; they go to the CPU or GPU0", path,
               device_word(p.embeddings_device));
  ExpertPlacement out(static_cast<size_t>(hp.n_layer));
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const plan::LayerPlacement& lp = p.layers[static_cast<size_t>(il)];
    STRATA_CHECK(lp.attention_device == kGpuDevice,
                 "{}: the plan keeps layer {}'s attention on {}; this strata runs attention, "
                 "norms and routers on one GPU and splits only the routed experts (layers on the "
                 "CPU or on a second GPU are not supported yet)",
                 path, il, device_word(lp.attention_device));
    if (lp.expert_device.empty()) continue;
    STRATA_CHECK(static_cast<int64_t>(lp.expert_device.size()) == hp.n_expert,
                 "{}: the plan places {} experts in layer {} but the model has {}", path,
                 lp.expert_device.size(), il, hp.n_expert);
    ExpertsOnDevice on(static_cast<size_t>(hp.n_expert));
    bool all = true;
    for (size_t e = 0; e < on.size(); ++e) {
      const int d = lp.expert_device[e];
      STRATA_CHECK(d == kGpuDevice || d == plan::kCpuDevice,
                   "{}: the plan puts expert {} of layer {} on {}; experts go to the CPU or the "
                   "GPU of their layer",
                   path, e, il, device_word(d));
      on[e] = d == kGpuDevice;
      all = all && on[e];
    }
    if (!all) out[static_cast<size_t>(il)] = std::move(on);
  }
  return out;
}

}  // namespace

std::string describe_placement(const plan::Placement& p, const ModelHParams& hp,
                               const std::string& device_label, uint64_t expert_bytes) {
  if (hp.n_expert == 0) return fmt::format("every layer on {}", device_label);
  int whole = 0, in_ram_layers = 0;
  int64_t singles = 0, in_ram = 0;
  for (const plan::LayerPlacement& lp : p.layers) {
    int64_t held = 0;
    for (int d : lp.expert_device) held += d != plan::kCpuDevice;
    if (held == hp.n_expert) {
      ++whole;
    } else {
      singles += held;
      in_ram += hp.n_expert - held;
      in_ram_layers += held == 0;
    }
  }
  const uint64_t per_expert = hp.n_layer && hp.n_expert
                                  ? expert_bytes / static_cast<uint64_t>(hp.n_layer * hp.n_expert)
                                  : 0;
  return fmt::format(
      "attention, routers and shared experts of all {} layers on {}; {} layers' experts whole on "
      "it, {} layers' wholly in RAM, {} single experts on it; {} experts ({}) in RAM computed by "
      "the CPU; token embeddings {}",
      hp.n_layer, device_label, whole, in_ram_layers, singles, in_ram,
      format_bytes(static_cast<uint64_t>(in_ram) * per_expert),
      p.embeddings_device == plan::kCpuDevice ? "in RAM" : "on the GPU");
}

std::unique_ptr<Model> load_gpu_model(const std::string& path, const std::vector<int>& devices,
                                      uint64_t memory_limit, const plan::Placement* placement) {
  STRATA_CHECK(!devices.empty(), "load_gpu_model: no device given");
  if (devices.size() > 1) {
    log::warn(
        "--device: {} devices given; this version runs a model on one device (vk{}) and the CPU; "
        "splitting layers across GPUs is not supported yet",
        devices.size(), devices[0]);
  }
  const DeviceInfo& info = Instance::get().devices().at(static_cast<size_t>(devices[0]));
  auto device = std::make_shared<Device>(info);
  device->set_memory_limit(memory_limit);
  return load_gpu_model(path, std::move(device), placement);
}

std::unique_ptr<Model> load_gpu_model(const std::string& path, std::shared_ptr<Device> device,
                                      const plan::Placement* placement) {
  std::unique_ptr<Model> cpu = Model::load(path, LoadMode::mmap);
  GpuPlacement gpu_placement;
  std::string summary = fmt::format("every tensor on {}", device->label());
  if (placement) {
    gpu_placement.experts = experts_from_plan(*placement, cpu->hparams(), path);
    gpu_placement.embeddings_on_device = placement->embeddings_device != plan::kCpuDevice;
    summary = describe_placement(*placement, cpu->hparams(), device->label(),
                                 static_cast<uint64_t>(cpu->expert_bytes()));
    log::info("plan: {}", summary);
  } else {
    log::info("running {} on {}", path, device->label());
  }
  if (auto* hybrid = dynamic_cast<HybridDecoder*>(cpu.get())) {
    cpu.release();
    auto gpu = std::make_unique<GpuHybridDecoder>(std::unique_ptr<HybridDecoder>(hybrid),
                                                  std::move(device), std::move(gpu_placement));
    gpu->set_placement_summary(summary);
    return gpu;
  }
  auto* standard = dynamic_cast<StandardDecoder*>(cpu.get());
  STRATA_CHECK(standard,
               "{}: architecture '{}' has no GPU path yet (supported on the GPU: "
               "qwen35moe, qwen3moe, qwen3, llama); run it with --device none",
               path, cpu->hparams().arch);
  cpu.release();
  auto gpu = std::make_unique<GpuStandardDecoder>(std::unique_ptr<StandardDecoder>(standard),
                                                  std::move(device), std::move(gpu_placement));
  gpu->set_placement_summary(summary);
  return gpu;
}

int64_t gpu_step_encodings(const Model& model) {
  if (auto* standard = dynamic_cast<const GpuStandardDecoder*>(&model))
    return standard->step_encodings();
  if (auto* hybrid = dynamic_cast<const GpuHybridDecoder*>(&model)) return hybrid->step_encodings();
  return -1;
}

const HybridTimeline* hybrid_timeline(const Model& model) {
  if (auto* standard = dynamic_cast<const GpuStandardDecoder*>(&model))
    return &standard->hybrid_timeline();
  if (auto* hybrid = dynamic_cast<const GpuHybridDecoder*>(&model))
    return &hybrid->hybrid_timeline();
  return nullptr;
}

Device* gpu_device(Model& model) {
  if (auto* standard = dynamic_cast<GpuStandardDecoder*>(&model)) return &standard->device();
  if (auto* hybrid = dynamic_cast<GpuHybridDecoder*>(&model)) return &hybrid->device();
  return nullptr;
}

}  // namespace strata::vk
