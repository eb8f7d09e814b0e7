#include "backend/vulkan/gpu_probe.h"

#include <fmt/format.h>

#include "backend/vulkan/bandwidth_probe.h"
#include "backend/vulkan/device.h"
#include "backend/vulkan/memory_in_use_check.h"
#include "plan/calibration.h"
#include "util/error.h"
#include "util/log.h"

namespace strata::vk {
namespace {

// One cache entry per device model and driver: a new driver can change both bandwidths.
std::string cache_key(const DeviceInfo& d) {
  return fmt::format("{} | {} {}", d.name, d.driver, d.driver_version);
}

plan::GpuInfo probe_one(const DeviceInfo& d, const plan::ProbeOptions& options) {
  plan::GpuInfo gpu;
  gpu.name = d.name;
  gpu.vram_total_bytes = d.device_local_bytes;
  gpu.vram_free_bytes = d.device_local_budget ? d.device_local_budget : d.device_local_bytes;
  warn_memory_in_use(d);
  const std::string path =
      options.cache_path.empty() ? plan::default_hardware_cache_path() : options.cache_path;
  const std::string key = cache_key(d);
  if (!options.remeasure) {
    const nlohmann::json cache = plan::read_hardware_cache(path);
    if (cache.contains("gpus") && cache["gpus"].is_object() && cache["gpus"].contains(key)) {
      const nlohmann::json& e = cache["gpus"][key];
      if (e.value("read_gbps", 0.0) > 0 && e.value("upload_gbps", 0.0) > 0) {
        gpu.bandwidth_gbps = e["read_gbps"].get<double>();
        gpu.pcie_gbps = e["upload_gbps"].get<double>();
        gpu.bandwidth_source = "cached, measured " + e.value("date", std::string("?"));
        return gpu;
      }
    }
  }
  log::info("measuring the read and upload bandwidth of vk{} ({})", d.index, d.name);
  Device device(d);
  const GpuBandwidth bw = measure_gpu_bandwidth(device);
  gpu.bandwidth_gbps = bw.read_gbps;
  gpu.pcie_gbps = bw.upload_gbps;
  gpu.bandwidth_source = "measured " + plan::today_date();
  plan::update_hardware_cache(path, [&](nlohmann::json& j) {
    if (!j.contains("gpus") || !j["gpus"].is_object()) j["gpus"] = nlohmann::json::object();
    j["gpus"][key] = {{"date", plan::today_date()},         {"driver", d.driver},
                      {"driver_version", d.driver_version}, {"read_gbps", bw.read_gbps},
                      {"upload_gbps", bw.upload_gbps},      {"buffer_bytes", bw.bytes}};
  });
  return gpu;
}

}  // namespace

std::vector<plan::GpuInfo> probe_vulkan_gpus(const std::string& devices,
                                             const plan::ProbeOptions& options) {
  std::vector<int> indices;
  if (devices == "auto") {
    try {
      indices = parse_device_list("auto");
    } catch (const Error& e) {
      log::debug("--device auto: {}; planning without a GPU", e.what());
      return {};
    }
  } else {
    indices = parse_device_list(devices);
  }
  std::vector<plan::GpuInfo> gpus;
  for (int i : indices)
    gpus.push_back(probe_one(Instance::get().devices().at(static_cast<size_t>(i)), options));
  return gpus;
}

}  // namespace strata::vk
