#pragma once
// The machine's temperatures, power and memory while serving (NVML for NVIDIA GPUs where the
// driver installed it, hwmon for the CPU), sampled on a thread of its own, and the watchdog: above
// --max-gpu-temp / --max-cpu-temp new requests wait in the queue (running ones finish), and start
// again once it has cooled down.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/scheduler.h"
#include "util/hwmon.h"
#include "util/nvml.h"
#include "util/system_memory.h"

namespace strata::server {

struct TelemetryOptions {
  double max_gpu_celsius = 0;  // 0: no limit
  double max_cpu_celsius = 0;
  std::filesystem::path hwmon_root = "/sys/class/hwmon";
  std::chrono::milliseconds interval{1000};
  bool nvml = true;  // false: do not load NVML at all
};

// Held work starts again this far below the limit, so a temperature at the limit does not
// flip the queue every second.
constexpr double kWatchdogHysteresisCelsius = 3;

struct TelemetrySample {
  std::vector<GpuTelemetry> gpus;
  std::optional<CpuTemperature> cpu;
  SystemMemory ram;
};

// Why new work must wait now (empty: it need not), given whether it waits already.
std::string watchdog_reason(const TelemetrySample& s, const TelemetryOptions& o, bool held);

class TelemetryMonitor {
 public:
  // Starts sampling at once; `scheduler` (may be null) is held and released by the watchdog.
  TelemetryMonitor(TelemetryOptions options, Scheduler* scheduler);
  ~TelemetryMonitor();
  TelemetryMonitor(const TelemetryMonitor&) = delete;
  TelemetryMonitor& operator=(const TelemetryMonitor&) = delete;

  TelemetrySample latest() const;
  // For /props and /status: the figures that exist (absent ones are left out) and the limits.
  nlohmann::ordered_json json() const;
  // Prometheus gauges for /metrics.
  std::string prometheus() const;

 private:
  void sample_once();
  void run();

  TelemetryOptions options_;
  Scheduler* scheduler_;
  std::unique_ptr<Nvml> nvml_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  TelemetrySample latest_;
  bool held_ = false;
  std::thread thread_;
};

}  // namespace strata::server
