#include "util/nvml.h"

#include <dlfcn.h>

#include <array>
#include <cstdlib>

namespace strata {

// NVML's C interface, the part strata calls (declared here: no NVIDIA header is needed to build).
namespace {
using Return = int;  // nvmlReturn_t: 0 is success
using Device = void*;
constexpr Return kSuccess = 0;
constexpr Return kInsufficientSize = 7;
constexpr int kTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU
constexpr int kClockSm = 1, kClockMem = 2;
struct Memory {
  unsigned long long total, free, used;
};
struct ProcessInfo {  // nvmlProcessInfo_v2_t, what the _v3 process queries fill
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id, compute_instance_id;
};
constexpr unsigned long long kNotAvailable = ~0ull;  // NVML_VALUE_NOT_AVAILABLE
}  // namespace

struct Nvml::Api {
  Return (*init)() = nullptr;
  Return (*shutdown)() = nullptr;
  Return (*count)(unsigned int*) = nullptr;
  Return (*handle)(unsigned int, Device*) = nullptr;
  Return (*name)(Device, char*, unsigned int) = nullptr;
  Return (*uuid)(Device, char*, unsigned int) = nullptr;
  Return (*temperature)(Device, int, unsigned int*) = nullptr;
  Return (*power)(Device, unsigned int*) = nullptr;
  Return (*clock)(Device, int, unsigned int*) = nullptr;
  Return (*memory)(Device, Memory*) = nullptr;
  Return (*compute_processes)(Device, unsigned int*, ProcessInfo*) = nullptr;
  Return (*graphics_processes)(Device, unsigned int*, ProcessInfo*) = nullptr;
  Return (*process_name)(unsigned int, char*, unsigned int) = nullptr;
};

namespace {

template <typename Fn>
void bind(void* handle, Fn& fn, const char* symbol) {
  fn = reinterpret_cast<Fn>(dlsym(handle, symbol));
}

std::optional<Device> device(const Nvml::Api& api, int index) {
  Device d = nullptr;
  if (api.handle(static_cast<unsigned int>(index), &d) != kSuccess) return std::nullopt;
  return d;
}

}  // namespace

std::unique_ptr<Nvml> Nvml::open(std::string* why_not) {
  const char* path = std::getenv("STRATA_NVML_LIBRARY");
  return open_library(path && *path ? path : "libnvidia-ml.so.1", why_not);
}

std::unique_ptr<Nvml> Nvml::open_library(const std::string& path, std::string* why_not) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    if (why_not) *why_not = "NVML not found (" + path + ")";
    return nullptr;
  }
  auto api = std::make_unique<Api>();
  bind(handle, api->init, "nvmlInit_v2");
  bind(handle, api->shutdown, "nvmlShutdown");
  bind(handle, api->count, "nvmlDeviceGetCount_v2");
  bind(handle, api->handle, "nvmlDeviceGetHandleByIndex_v2");
  bind(handle, api->name, "nvmlDeviceGetName");
  bind(handle, api->uuid, "nvmlDeviceGetUUID");
  bind(handle, api->temperature, "nvmlDeviceGetTemperature");
  bind(handle, api->power, "nvmlDeviceGetPowerUsage");
  bind(handle, api->clock, "nvmlDeviceGetClockInfo");
  bind(handle, api->memory, "nvmlDeviceGetMemoryInfo");
  bind(handle, api->compute_processes, "nvmlDeviceGetComputeRunningProcesses_v3");
  bind(handle, api->graphics_processes, "nvmlDeviceGetGraphicsRunningProcesses_v3");
  bind(handle, api->process_name, "nvmlSystemGetProcessName");
  if (!api->init || !api->shutdown || !api->count || !api->handle) {
    if (why_not) *why_not = path + " lacks NVML's entry points";
    dlclose(handle);
    return nullptr;
  }
  if (const Return r = api->init(); r != kSuccess) {
    if (why_not) *why_not = "NVML failed to start (error " + std::to_string(r) + ")";
    dlclose(handle);
    return nullptr;
  }
  return std::unique_ptr<Nvml>(new Nvml(handle, std::move(api)));
}

Nvml::Nvml(void* handle, std::unique_ptr<Api> api) : handle_(handle), api_(std::move(api)) {}

Nvml::~Nvml() {
  api_->shutdown();
  dlclose(handle_);
}

std::vector<GpuTelemetry> Nvml::sample() const {
  const Api& a = *api_;
  std::vector<GpuTelemetry> out;
  unsigned int n = 0;
  if (a.count(&n) != kSuccess) return out;
  for (unsigned int i = 0; i < n; ++i) {
    const auto d = device(a, static_cast<int>(i));
    if (!d) continue;
    GpuTelemetry g;
    g.index = static_cast<int>(i);
    std::array<char, 128> text{};
    if (a.name && a.name(*d, text.data(), text.size()) == kSuccess) g.name = text.data();
    text.fill(0);
    if (a.uuid && a.uuid(*d, text.data(), text.size()) == kSuccess) g.uuid = text.data();
    unsigned int value = 0;
    if (a.temperature && a.temperature(*d, kTemperatureGpu, &value) == kSuccess)
      g.temperature_celsius = value;
    if (a.power && a.power(*d, &value) == kSuccess) g.power_watts = value / 1000.0;
    if (a.clock && a.clock(*d, kClockSm, &value) == kSuccess) g.sm_clock_mhz = value;
    if (a.clock && a.clock(*d, kClockMem, &value) == kSuccess) g.memory_clock_mhz = value;
    Memory m{};
    if (a.memory && a.memory(*d, &m) == kSuccess) {
      g.memory_used_bytes = m.used;
      g.memory_total_bytes = m.total;
    }
    out.push_back(std::move(g));
  }
  return out;
}

std::vector<GpuProcess> Nvml::processes(int index) const {
  const Api& a = *api_;
  std::vector<GpuProcess> out;
  const auto d = device(a, index);
  if (!d) return out;
  for (auto* query : {a.compute_processes, a.graphics_processes}) {
    if (!query) continue;
    std::vector<ProcessInfo> infos(64);
    unsigned int n = static_cast<unsigned int>(infos.size());
    Return r = query(*d, &n, infos.data());
    if (r == kInsufficientSize) {  // n holds the count now
      infos.resize(n + 16);
      n = static_cast<unsigned int>(infos.size());
      r = query(*d, &n, infos.data());
    }
    if (r != kSuccess) continue;
    for (unsigned int i = 0; i < n && i < infos.size(); ++i) {
      const ProcessInfo& p = infos[i];
      bool seen = false;  // a process may be in both lists
      for (const GpuProcess& q : out) seen = seen || q.pid == p.pid;
      if (seen) continue;
      GpuProcess gp;
      gp.pid = p.pid;
      gp.used_bytes = p.used_gpu_memory == kNotAvailable ? 0 : p.used_gpu_memory;
      std::array<char, 256> name{};
      if (a.process_name && a.process_name(p.pid, name.data(), name.size()) == kSuccess)
        gp.name = name.data();
      out.push_back(std::move(gp));
    }
  }
  return out;
}

}  // namespace strata
