#pragma once
// The machine a plan is made for: cores, RAM (size and measured read bandwidth) and GPUs. Either
// probed (/proc, sysfs, a cached bandwidth measurement, GPUs through a probe the caller supplies:
// the Vulkan backend's, which measures them) or hypothetical, from flags such as `--gpu 8G:448
// --ram 32G:29.1 --cores 6`.

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/ggml_type.h"
#include "plan/calibration.h"

namespace strata::plan {

// Latency of one hop of the activations between CPU and GPU (synchronisation, copy, thread
// wake-up); a CPU-resident expert layer costs a round trip, two hops. Fitted to the published
// runs with the cost model's other constants (cost_model.h, CostConstants::hop_ms).
constexpr double kDefaultHopLatencyMs = 0.02659;

struct GpuInfo {
  std::string name;
  uint64_t vram_total_bytes = 0;
  uint64_t vram_free_bytes = 0;  // what a plan may use (hypothetical: the size given)
  double bandwidth_gbps = 0;     // VRAM read bandwidth, GB/s (1e9 bytes)
  double pcie_gbps = 16;         // host-to-device upload, GB/s
  double tensor_tflops = 0;      // published dense FP16 tensor throughput (0: not known)
  std::string bandwidth_source;  // "measured 2026-12-01", "cached, measured ...", "" (given)
  bool hypothetical = false;
};

struct HardwareProfile {
  std::string cpu_model;
  int physical_cores = 1;
  std::string simd;  // e.g. "avx2 fma f16c avx512f ..."
  uint64_t ram_total_bytes = 0;
  uint64_t ram_available_bytes = 0;
  double ram_bandwidth_gbps = 0;     // measured read bandwidth (or given)
  std::string ram_bandwidth_source;  // "measured 2026-03-01", "cached from 2026-03-01", "given"
  double hop_latency_ms = kDefaultHopLatencyMs;
  std::vector<GpuInfo> gpus;
  bool hypothetical = false;  // any value came from flags
  // Threads the plan is for (-t; default the physical cores).
  int threads = 1;
  // Micro-benchmarks of strata's kernels at `threads` (calibration.h). Present only when the CPU
  // and RAM are probed (no --ram / --cores): the cost model then prices the CPU with them instead
  // of the FIELD constants.
  std::optional<CpuCalibration> cpu_calibration;
};

// Flags that replace probed values. Empty / nullopt: probe.
struct HardwareOverrides {
  std::vector<std::string> gpus;   // "8G:448" or "8G:448:16" (VRAM : GB/s [: PCIe GB/s]); "none"
  std::optional<std::string> ram;  // "32G:29.1" (RAM size : read GB/s)
  std::optional<int> cores;
  std::optional<double> hop_latency_ms;
};

// Calibration options for a probed machine: threads 0 (= the physical cores).
inline CalibrationOptions probed_calibration_options() {
  CalibrationOptions o;
  o.threads = 0;
  return o;
}

struct ProbeOptions;
// Finds and measures the machine's GPUs (empty: none). plan/ cannot see the GPU backend, so
// the caller (strata plan) supplies it.
using GpuProbe = std::function<std::vector<GpuInfo>(const ProbeOptions&)>;

struct ProbeOptions {
  bool remeasure = false;  // ignore the cached bandwidth measurements
  std::string cache_path;  // "" = $XDG_CACHE_HOME/strata/hardware.json or ~/.cache/...
  int64_t measure_bytes = int64_t{512} << 20;
  // CPU calibration (probed CPU and RAM only): threads (0: physical cores) and the weight types
  // the model uses. calibrate = false skips it (the FIELD constants price the CPU).
  bool calibrate = true;
  CalibrationOptions calibration = probed_calibration_options();
  GpuProbe probe_gpus;  // null: no GPUs are probed
};

// Probes only what the overrides leave open (no bandwidth test when --ram gives it, no GPU
// probe when --gpu is given), then applies the overrides.
HardwareProfile make_hardware_profile(const HardwareOverrides& overrides,
                                      const ProbeOptions& probe);

// Sizes: "8G", "7.6GiB", "512M", "18.56GB", "1234" (bytes). A bare G/M/K suffix means
// `bare_unit_base` (1024 for memory sizes, 1000 for file sizes); "GB" is always 1e9 and "GiB" 2^30.
uint64_t parse_size(std::string_view text, int bare_unit_base = 1024);
GpuInfo parse_gpu_spec(std::string_view spec);
// "32G:29.1" -> {bytes, GB/s}
std::pair<uint64_t, double> parse_ram_spec(std::string_view spec);

// hardware.json (measurements cached per machine): its contents ({} when absent or unreadable),
// and a read-change-write that keeps every other entry.
nlohmann::json read_hardware_cache(const std::string& path);
void update_hardware_cache(const std::string& path,
                           const std::function<void(nlohmann::json&)>& change);

// MemAvailable of /proc/meminfo (0 when unreadable): a cheap probe, no calibration.
uint64_t available_ram_bytes();
// /proc/cpuinfo's model name (the key of this machine's cached measurements).
std::string cpu_model_name();

std::string default_hardware_cache_path();

}  // namespace strata::plan
