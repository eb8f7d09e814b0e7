#pragma once
// NVIDIA's management library (NVML), loaded at run time where the driver installed it: GPU
// temperature, power, clocks and memory, and the processes that hold GPU memory. A machine without
// it (or whose calls fail) simply has no such figures: never an error.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace strata {

struct GpuProcess {
  uint32_t pid = 0;
  std::string name;         // the process's name ("" when NVML cannot tell)
  uint64_t used_bytes = 0;  // 0 when NVML cannot tell (it may not, under some drivers)
};

struct GpuTelemetry {
  int index = 0;
  std::string name{}, uuid{};  // uuid as NVML gives it: "GPU-xxxxxxxx-xxxx-..."
  std::optional<double> temperature_celsius{}, power_watts{};
  std::optional<uint32_t> sm_clock_mhz{}, memory_clock_mhz{};
  std::optional<uint64_t> memory_used_bytes{}, memory_total_bytes{};
};

class Nvml {
 public:
  // Loads the library: STRATA_NVML_LIBRARY when set (a path), else libnvidia-ml.so.1, and
  // initializes it. Null when it is absent or its initialization fails (with why, for the log).
  static std::unique_ptr<Nvml> open(std::string* why_not = nullptr);
  // The same from a given path.
  static std::unique_ptr<Nvml> open_library(const std::string& path, std::string* why_not);
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  // One reading of every GPU; a call that fails leaves its field empty.
  std::vector<GpuTelemetry> sample() const;
  // The processes with memory on GPU `index` (compute and graphics), with their names.
  std::vector<GpuProcess> processes(int index) const;

  struct Api;

 private:
  Nvml(void* handle, std::unique_ptr<Api> api);
  void* handle_;
  std::unique_ptr<Api> api_;
};

}  // namespace strata
