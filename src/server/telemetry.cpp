#include "server/telemetry.h"

#include <fmt/format.h>

#include "server/metrics.h"
#include "util/log.h"

namespace strata::server {

std::string watchdog_reason(const TelemetrySample& s, const TelemetryOptions& o, bool held) {
  // Above the limit: hold. Held: keep holding until every sensor is below limit - hysteresis.
  const auto too_hot = [&](double celsius, double limit) {
    return limit > 0 && celsius >= (held ? limit - kWatchdogHysteresisCelsius : limit);
  };
  for (const GpuTelemetry& g : s.gpus) {
    if (g.temperature_celsius && too_hot(*g.temperature_celsius, o.max_gpu_celsius)) {
      return fmt::format("GPU {} ({}) at {:.0f} °C, --max-gpu-temp {:.0f}{}", g.index, g.name,
                         *g.temperature_celsius, o.max_gpu_celsius,
                         held ? fmt::format(" (resumes below {:.0f})",
                                            o.max_gpu_celsius - kWatchdogHysteresisCelsius)
                              : "");
    }
  }
  if (s.cpu && too_hot(s.cpu->celsius, o.max_cpu_celsius)) {
    return fmt::format("CPU ({}) at {:.0f} °C, --max-cpu-temp {:.0f}{}", s.cpu->sensor,
                       s.cpu->celsius, o.max_cpu_celsius,
                       held ? fmt::format(" (resumes below {:.0f})",
                                          o.max_cpu_celsius - kWatchdogHysteresisCelsius)
                            : "");
  }
  return "";
}

TelemetryMonitor::TelemetryMonitor(TelemetryOptions options, Scheduler* scheduler)
    : options_(std::move(options)), scheduler_(scheduler) {
  if (options_.nvml) {
    std::string why;
    nvml_ = Nvml::open(&why);
    if (!nvml_ && options_.max_gpu_celsius > 0)
      log::warn("--max-gpu-temp: {}, so GPU temperatures cannot be watched", why);
  }
  sample_once();
  if (options_.max_cpu_celsius > 0 && !latest().cpu)
    log::warn("--max-cpu-temp: no CPU temperature sensor under {}", options_.hwmon_root.string());
  thread_ = std::thread([this] { run(); });
}

TelemetryMonitor::~TelemetryMonitor() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void TelemetryMonitor::sample_once() {
  TelemetrySample s;
  if (nvml_) s.gpus = nvml_->sample();
  s.cpu = cpu_temperature(options_.hwmon_root);
  s.ram = system_memory();
  std::string reason;
  {
    std::lock_guard lock(mutex_);
    reason = watchdog_reason(s, options_, held_);
    held_ = !reason.empty();
    latest_ = std::move(s);
  }
  if (scheduler_ && (options_.max_gpu_celsius > 0 || options_.max_cpu_celsius > 0))
    scheduler_->hold_new_work(reason);
}

void TelemetryMonitor::run() {
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, options_.interval, [&] { return stopping_; })) {
    lock.unlock();
    try {
      sample_once();
    } catch (const std::exception& e) {  // a sensor's trouble never stops the server
      log::warn("telemetry: {}", e.what());
    }
    lock.lock();
  }
}

TelemetrySample TelemetryMonitor::latest() const {
  std::lock_guard lock(mutex_);
  return latest_;
}

nlohmann::ordered_json TelemetryMonitor::json() const {
  const TelemetrySample s = latest();
  nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
  for (const GpuTelemetry& g : s.gpus) {
    nlohmann::ordered_json j = {{"index", g.index}, {"name", g.name}, {"uuid", g.uuid}};
    if (g.temperature_celsius) j["temperature_celsius"] = *g.temperature_celsius;
    if (g.power_watts) j["power_watts"] = *g.power_watts;
    if (g.sm_clock_mhz) j["sm_clock_mhz"] = *g.sm_clock_mhz;
    if (g.memory_clock_mhz) j["memory_clock_mhz"] = *g.memory_clock_mhz;
    if (g.memory_used_bytes) j["memory_used_bytes"] = *g.memory_used_bytes;
    if (g.memory_total_bytes) j["memory_total_bytes"] = *g.memory_total_bytes;
    gpus.push_back(std::move(j));
  }
  nlohmann::ordered_json out = {{"gpus", gpus}};
  if (s.cpu) out["cpu"] = {{"temperature_celsius", s.cpu->celsius}, {"sensor", s.cpu->sensor}};
  out["ram"] = {{"total_bytes", s.ram.total_bytes},
                {"available_bytes", s.ram.available_bytes},
                {"process_resident_bytes", s.ram.process_resident_bytes}};
  out["limits"] = {{"max_gpu_celsius", options_.max_gpu_celsius},
                   {"max_cpu_celsius", options_.max_cpu_celsius}};
  return out;
}

std::string TelemetryMonitor::prometheus() const {
  const TelemetrySample s = latest();
  std::string out;
  const auto header = [&](const char* name, const char* help) {
    out += fmt::format("# HELP strata_{} {}\n# TYPE strata_{} gauge\n", name, help, name);
  };
  const auto per_gpu = [&](const char* name, const char* help, auto field) {
    bool any = false;
    for (const GpuTelemetry& g : s.gpus) any = any || (g.*field).has_value();
    if (!any) return;
    header(name, help);
    for (const GpuTelemetry& g : s.gpus) {
      if (!(g.*field)) continue;
      out += fmt::format("strata_{}{{gpu=\"{}\",name=\"{}\"}} {}\n", name, g.index,
                         prometheus_label(g.name), *(g.*field));
    }
  };
  per_gpu("gpu_temperature_celsius", "GPU temperature (NVML).", &GpuTelemetry::temperature_celsius);
  per_gpu("gpu_power_watts", "GPU power draw (NVML).", &GpuTelemetry::power_watts);
  per_gpu("gpu_sm_clock_mhz", "GPU SM clock (NVML).", &GpuTelemetry::sm_clock_mhz);
  per_gpu("gpu_memory_clock_mhz", "GPU memory clock (NVML).", &GpuTelemetry::memory_clock_mhz);
  per_gpu("gpu_memory_used_bytes", "GPU memory in use by every process (NVML).",
          &GpuTelemetry::memory_used_bytes);
  if (s.cpu) {
    header("cpu_temperature_celsius", "CPU package temperature (hwmon).");
    out += fmt::format("strata_cpu_temperature_celsius{{sensor=\"{}\"}} {}\n",
                       prometheus_label(s.cpu->sensor), s.cpu->celsius);
  }
  header("ram_available_bytes", "RAM available to new allocations (MemAvailable).");
  out += fmt::format("strata_ram_available_bytes {}\n", s.ram.available_bytes);
  header("process_resident_bytes", "This server's resident memory.");
  out += fmt::format("strata_process_resident_bytes {}\n", s.ram.process_resident_bytes);
  return out;
}

}  // namespace strata::server
