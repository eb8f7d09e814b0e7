#include "backend/vulkan/gpu_model.h"
#include "backend/vulkan/memory_in_use_check.h"

#include <algorithm>

#include "backend/vulkan/gpu_decoder.h"
#include "util/error.h"
#include "util/format_bytes.h"
#include "util/log.h"

namespace strata::vk {
namespace {

// What a plan keeps on the devices, checked against what this executor runs: each layer on one
// of the GPUs (devices 1..n_devices) or on the CPU, each routed expert on its layer's GPU or in
// RAM (a CPU layer's experts in RAM), the token embeddings in RAM or on layer 0's GPU, the output
// head in RAM or on the last layer's GPU.
GpuPlacement placement_from_plan(const plan::Placement& p, const ModelHParams& hp,
                                 const std::string& path, size_t n_devices) {
  STRATA_CHECK(static_cast<int64_t>(p.layers.size()) == hp.n_layer,
               "{}: the plan places {} layers but the model has {}", path, p.layers.size(),
               hp.n_layer);
  const auto device_word = [](int d) {
    return d == plan::kCpuDevice ? std::string("the CPU") : fmt::format("GPU{}", d - 1);
  };
  const auto known = [&](int d) { return d >= 0 && d <= static_cast<int>(n_devices); };
  GpuPlacement out;
  out.experts.resize(static_cast<size_t>(hp.n_layer));
  out.layer_device.resize(static_cast<size_t>(hp.n_layer));
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const plan::LayerPlacement& lp = p.layers[static_cast<size_t>(il)];
    const int a = lp.attention_device;
    STRATA_CHECK(known(a),
                 "{}: the plan keeps layer {}'s attention on {}, and --device names {} GPU(s)",
                 path, il, device_word(a), n_devices);
    out.layer_device[static_cast<size_t>(il)] = a == plan::kCpuDevice ? kCpuLayers : a - 1;
    if (lp.expert_device.empty()) continue;
    STRATA_CHECK(static_cast<int64_t>(lp.expert_device.size()) == hp.n_expert,
                 "{}: the plan places {} experts in layer {} but the model has {}", path,
                 lp.expert_device.size(), il, hp.n_expert);
    ExpertsOnDevice on(static_cast<size_t>(hp.n_expert));
    bool all = true;
    for (size_t e = 0; e < on.size(); ++e) {
      const int d = lp.expert_device[e];
      STRATA_CHECK(d == a || d == plan::kCpuDevice,
                   "{}: the plan puts expert {} of layer {} on {}; experts go to the CPU or the "
                   "GPU of their layer ({})",
                   path, e, il, device_word(d), device_word(a));
      on[e] = d != plan::kCpuDevice;
      all = all && on[e];
    }
    if (!all && a != plan::kCpuDevice) out.experts[static_cast<size_t>(il)] = std::move(on);
  }
  const int first = p.layers.empty() ? 1 : p.layers.front().attention_device;
  const int last = p.layers.empty() ? 1 : p.layers.back().attention_device;
  STRATA_CHECK(p.output_device == last || p.output_device == plan::kCpuDevice,
               "{}: the plan keeps the output head on {}; it goes to the CPU or to {}, where "
               "the last layer runs",
               path, device_word(p.output_device), device_word(last));
  STRATA_CHECK(p.embeddings_device == first || p.embeddings_device == plan::kCpuDevice,
               "{}: the plan keeps the token embeddings on {}; they go to the CPU or to {}, "
               "where layer 0 runs",
               path, device_word(p.embeddings_device), device_word(first));
  out.embeddings_on_device = p.embeddings_device != plan::kCpuDevice;
  out.head_on_device = p.output_device != plan::kCpuDevice;
  return out;
}

}  // namespace

std::string describe_placement(const plan::Placement& p, const ModelHParams& hp,
                               const std::vector<std::string>& device_labels,
                               uint64_t bytes_per_expert) {
  const auto label = [&](int d) {
    if (d == plan::kCpuDevice) return std::string("the CPU");
    return d >= 1 && d <= static_cast<int>(device_labels.size())
               ? device_labels[static_cast<size_t>(d - 1)]
               : fmt::format("GPU{}", d - 1);
  };
  std::vector<std::string> ranges;  // "layers 0-11 on vk0"
  for (size_t l = 0; l < p.layers.size();) {
    size_t end = l;
    while (end + 1 < p.layers.size() &&
           p.layers[end + 1].attention_device == p.layers[l].attention_device)
      ++end;
    const std::string span =
        l == end ? fmt::format("layer {}", l) : fmt::format("layers {}-{}", l, end);
    ranges.push_back(fmt::format("{} on {}", span, label(p.layers[l].attention_device)));
    l = end + 1;
  }
  const std::string where =
      ranges.size() == 1 ? fmt::format("all {} layers on {}", hp.n_layer,
                                       label(p.layers.empty() ? 1 : p.layers[0].attention_device))
                         : fmt::format("{}", fmt::join(ranges, ", "));
  if (hp.n_expert == 0) return fmt::format("{}; output head on {}", where, label(p.output_device));
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
  return fmt::format(
      "attention, routers and shared experts of {}; {} layers' experts whole on their GPU, {} "
      "layers' wholly in RAM, {} single experts on a GPU; {} experts ({}) in RAM computed by the "
      "CPU; token embeddings {}; output head on {}",
      where, whole, in_ram_layers, singles, in_ram,
      format_bytes(static_cast<uint64_t>(in_ram) * bytes_per_expert),
      p.embeddings_device == plan::kCpuDevice ? "in RAM" : "on the GPU", label(p.output_device));
}

std::vector<uint64_t> device_budgets(const std::vector<int>& devices, uint64_t memory_limit) {
  std::vector<uint64_t> out;
  for (int d : devices) {
    const DeviceInfo& info = Instance::get().devices().at(static_cast<size_t>(d));
    const auto openings = static_cast<uint64_t>(std::count(devices.begin(), devices.end(), d));
    if (!memory_limit) warn_memory_in_use(info);
    out.push_back(memory_limit ? memory_limit
                               : (info.is_cpu ? 0 : info.device_local_budget / openings));
  }
  return out;
}

std::unique_ptr<Model> load_gpu_model(const std::string& path, const std::vector<int>& devices,
                                      uint64_t memory_limit, const plan::Placement* placement) {
  STRATA_CHECK(!devices.empty(), "load_gpu_model: no device given");
  const std::vector<uint64_t> budgets = device_budgets(devices, memory_limit);
  std::vector<std::shared_ptr<Device>> opened;
  for (size_t i = 0; i < devices.size(); ++i) {
    const DeviceInfo& info = Instance::get().devices().at(static_cast<size_t>(devices[i]));
    const int opening =
        static_cast<int>(std::count(devices.begin(), devices.begin() + i, devices[i]));
    auto device = std::make_shared<Device>(info, opening);
    // One GPU opened twice shares its memory between the openings.
    const bool shared = std::count(devices.begin(), devices.end(), devices[i]) > 1;
    device->set_memory_limit(memory_limit || shared ? budgets[i] : 0);
    opened.push_back(std::move(device));
  }
  return load_gpu_model(path, std::move(opened), placement);
}

std::unique_ptr<Model> load_gpu_model(const std::string& path, std::shared_ptr<Device> device,
                                      const plan::Placement* placement) {
  return load_gpu_model(path, std::vector<std::shared_ptr<Device>>{std::move(device)}, placement);
}

std::unique_ptr<Model> load_gpu_model(const std::string& path,
                                      std::vector<std::shared_ptr<Device>> devices,
                                      const plan::Placement* placement) {
  STRATA_CHECK(!devices.empty(), "load_gpu_model: no device given");
  std::unique_ptr<Model> cpu = Model::load(path, LoadMode::mmap);
  const ModelHParams& hp = cpu->hparams();
  std::vector<std::string> labels;
  for (const auto& d : devices) labels.push_back(d->label());
  GpuPlacement gpu_placement;
  std::string summary = fmt::format("every tensor on {}", labels[0]);
  if (placement) {
    gpu_placement = placement_from_plan(*placement, hp, path, devices.size());
    summary =
        describe_placement(*placement, hp, labels, static_cast<uint64_t>(cpu->expert_bytes()));
    log::info("plan: {}", summary);
  } else {
    if (devices.size() > 1) {
      log::warn("--device: {} devices and no placement; running on {} alone", devices.size(),
                labels[0]);
    }
    log::info("running {} on {}", path, labels[0]);
  }
  auto* decoder = dynamic_cast<DecoderModel*>(cpu.get());
  STRATA_CHECK(decoder, "{}: architecture '{}' has no GPU path yet; run it with --device none",
               path, cpu->hparams().arch);
  cpu.release();
  auto gpu = std::make_unique<GpuDecoder>(std::unique_ptr<DecoderModel>(decoder),
                                          std::move(devices), std::move(gpu_placement));
  gpu->set_placement_summary(summary);
  return gpu;
}

int64_t gpu_step_encodings(const Model& model) {
  const auto* gpu = dynamic_cast<const GpuDecoder*>(&model);
  return gpu ? gpu->step_encodings() : -1;
}

const HybridTimeline* hybrid_timeline(const Model& model) {
  const auto* gpu = dynamic_cast<const GpuDecoder*>(&model);
  return gpu ? &gpu->hybrid_timeline() : nullptr;
}

bool set_gpu_timestamps(Model& model, bool on) {
  auto* gpu = dynamic_cast<GpuDecoder*>(&model);
  if (gpu) gpu->set_timestamps(on);
  return gpu != nullptr;
}

Device* gpu_device(Model& model) {
  auto* gpu = dynamic_cast<GpuDecoder*>(&model);
  return gpu ? &gpu->device() : nullptr;
}

}  // namespace strata::vk
