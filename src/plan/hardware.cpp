#include "plan/hardware.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "plan/gpu_catalog.h"
#include "util/cpu_features.h"
#include "util/error.h"
#include "util/log.h"
#include "util/memory_bandwidth.h"
#include "util/system_load.h"
#include "util/system_memory.h"
#include "util/thread_pool.h"

namespace strata::plan {
namespace {

std::string trim(std::string s) {
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    parts.push_back(s.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return parts;
}

double parse_positive(std::string_view text, std::string_view what, std::string_view spec) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  STRATA_CHECK(
      ec == std::errc() && end == text.data() + text.size() && value > 0 && std::isfinite(value),
      "{} in '{}': expected a positive number, found '{}'", what, spec, text);
  return value;
}

// Bandwidth: measured once per machine (CPU model) and cached with its date; measured again
// after kRamBandwidthMaxAgeDays (memory gets changed, BIOS settings too).
constexpr int kRamBandwidthMaxAgeDays = 90;

void fill_ram_bandwidth(HardwareProfile& hw, const ProbeOptions& probe) {
  const std::string path =
      probe.cache_path.empty() ? default_hardware_cache_path() : probe.cache_path;
  if (!probe.remeasure) {
    const nlohmann::json j = read_hardware_cache(path);
    if (j.value("cpu_model", "") == hw.cpu_model && j.value("read_gbps", 0.0) > 0 &&
        days_since(j.value("date", "")) <= kRamBandwidthMaxAgeDays) {
      hw.ram_bandwidth_gbps = j["read_gbps"].get<double>();
      hw.ram_bandwidth_source = "cached, measured " + j.value("date", std::string("?"));
      return;
    }
  }
  ThreadPool pool(std::max(1, hw.physical_cores));
  const CpuTimeSample before = sample_cpu_time();
  const BandwidthMeasurement m = measure_read_bandwidth(pool, probe.measure_bytes, 3);
  const SystemLoad load = load_between(before, sample_cpu_time());
  hw.ram_bandwidth_gbps = m.read_gbps;
  hw.ram_bandwidth_source = "measured " + today_date();
  if (!measurements_cacheable(load.busy(), "the RAM bandwidth measurement", load.describe())) {
    hw.ram_bandwidth_source += " while " + load.describe() + " (not cached)";
    return;
  }
  update_hardware_cache(path, [&](nlohmann::json& j) {  // other entries stay
    j["cpu_model"] = hw.cpu_model;
    j["date"] = today_date();
    j["read_gbps"] = m.read_gbps;
    j["threads"] = m.threads;
    j["buffer_bytes"] = m.buffer_bytes;
    j["load_others_cpus"] = load.others_cpus;
  });
}

// The calibration streamed weights from RAM (a buffer far larger than the caches) faster than the
// cached RAM bandwidth allows: the bandwidth was measured while something else ran.
bool slower_than_calibration(const HardwareProfile& hw, const CalibrationOptions& options) {
  constexpr int64_t kLargerThanCaches = int64_t{128} << 20;
  constexpr double kTolerance = 1.15;  // the two probes read differently; 15% is not a conflict
  if (!hw.cpu_calibration || options.stream_bytes < kLargerThanCaches) return false;
  double fastest = 0;
  for (const auto& t : hw.cpu_calibration->types) fastest = std::max(fastest, t.gemv_gbps);
  return fastest > kTolerance * hw.ram_bandwidth_gbps;
}

}  // namespace

nlohmann::json read_hardware_cache(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json::object();
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    if (j.is_object()) return j;
  } catch (const std::exception& e) {
    log::warn("ignoring unreadable hardware cache {}: {}", path, e.what());
  }
  return nlohmann::json::object();
}

void update_hardware_cache(const std::string& path,
                           const std::function<void(nlohmann::json&)>& change) {
  nlohmann::json j = read_hardware_cache(path);
  change(j);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::ofstream out(path);
  if (out) {
    out << j.dump(2) << "\n";
  } else {
    log::warn("cannot write the hardware cache {}", path);
  }
}

uint64_t available_ram_bytes() {
  return system_memory().available_bytes;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return trim(line.substr(line.find(':') + 1));
  }
  return "unknown CPU";
}

std::string default_hardware_cache_path() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    return (std::filesystem::path(xdg) / "strata" / "hardware.json").string();
  }
  const char* home = std::getenv("HOME");
  return (std::filesystem::path(home && *home ? home : "/tmp") / ".cache" / "strata" /
          "hardware.json")
      .string();
}

uint64_t parse_size(std::string_view text, int bare_unit_base) {
  const std::string spec(text);
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  STRATA_CHECK(i > 0,
               "size '{}': expected a number with an optional unit (8G, 7.6GiB, 512M, "
               "18.56GB), found no number",
               spec);
  const double number = parse_positive(text.substr(0, i), "size", spec);
  std::string unit(text.substr(i));
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const double base = bare_unit_base;
  double scale = 0;
  if (unit.empty() || unit == "B")
    scale = 1;
  else if (unit == "K")
    scale = base;
  else if (unit == "M")
    scale = base * base;
  else if (unit == "G")
    scale = base * base * base;
  else if (unit == "T")
    scale = base * base * base * base;
  else if (unit == "KB")
    scale = 1e3;
  else if (unit == "MB")
    scale = 1e6;
  else if (unit == "GB")
    scale = 1e9;
  else if (unit == "TB")
    scale = 1e12;
  else if (unit == "KIB")
    scale = 1024.0;
  else if (unit == "MIB")
    scale = 1024.0 * 1024;
  else if (unit == "GIB")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "TIB")
    scale = 1024.0 * 1024 * 1024 * 1024;
  STRATA_CHECK(scale > 0, "size '{}': unknown unit '{}' (expected K, M, G, T, KB..TB or KiB..TiB)",
               spec, text.substr(i));
  return static_cast<uint64_t>(std::llround(number * scale));
}

namespace {

GpuInfo catalog_gpu(std::string_view spec, const std::vector<std::string_view>& parts) {
  const std::optional<CatalogGpu> known = find_catalog_gpu(parts[0]);
  if (!known) {
    const auto names = catalog_gpu_names();
    fail(
        "--gpu '{}': no GPU of that name in strata's table (known: {}, ...); give its memory and "
        "bandwidth instead, e.g. 8G:448 (8 GiB, 448 GB/s)",
        spec, fmt::join(names.begin(), names.begin() + 8, ", "));
  }
  STRATA_CHECK(parts.size() <= 2, "--gpu '{}': expected NAME or NAME:VRAM, e.g. 'RTX 4060 Ti:16G'",
               spec);
  GpuInfo gpu;
  gpu.hypothetical = true;
  gpu.vram_total_bytes = parts.size() == 2 ? parse_size(parts[1], 1024)
                                           : static_cast<uint64_t>(known->vram_gib * 1073741824.0);
  gpu.vram_free_bytes = gpu.vram_total_bytes;
  gpu.bandwidth_gbps = known->bandwidth_gbps;
  gpu.name = fmt::format("{} ({:.0f} GiB)", known->name, gpu.vram_total_bytes / 1073741824.0);
  gpu.bandwidth_source = fmt::format("published for the {}", known->name);
  return gpu;
}

}  // namespace

GpuInfo parse_gpu_spec(std::string_view spec) {
  const auto parts = split(spec, ':');
  STRATA_CHECK(!parts.empty() && !parts[0].empty(), "--gpu '{}': expected a GPU name or VRAM",
               spec);
  if (!std::isdigit(static_cast<unsigned char>(parts[0][0]))) return catalog_gpu(spec, parts);
  STRATA_CHECK(parts.size() <= 3,
               "--gpu '{}': expected VRAM[:BANDWIDTH[:PCIE]], e.g. 8G:448 (8 GiB, 448 GB/s) or "
               "8G:448:16 (PCIe 16 GB/s), or a name such as 'RTX 3060'",
               spec);
  GpuInfo gpu;
  gpu.hypothetical = true;
  gpu.vram_total_bytes = parse_size(parts[0], 1024);
  gpu.vram_free_bytes = gpu.vram_total_bytes;
  if (parts.size() >= 2) {
    gpu.bandwidth_gbps = parse_positive(parts[1], "--gpu bandwidth (GB/s)", spec);
  } else {
    gpu.bandwidth_gbps = kAssumedGpuBandwidthGbps;
    gpu.bandwidth_source = fmt::format(
        "assumed: an RTX 2070-class card; give {}:GB/s or the GPU's name for yours", parts[0]);
  }
  if (parts.size() == 3) gpu.pcie_gbps = parse_positive(parts[2], "--gpu PCIe (GB/s)", spec);
  gpu.name = fmt::format("hypothetical {:.1f} GiB {:g} GB/s", gpu.vram_total_bytes / 1073741824.0,
                         gpu.bandwidth_gbps);
  return gpu;
}

std::pair<uint64_t, double> parse_ram_spec(std::string_view spec) {
  const auto parts = split(spec, ':');
  STRATA_CHECK(parts.size() == 1 || parts.size() == 2,
               "--ram '{}': expected SIZE[:BANDWIDTH], e.g. 32G or 32G:29.1 (32 GiB, 29.1 GB/s "
               "read)",
               spec);
  const double gbps = parts.size() == 2 ? parse_positive(parts[1], "--ram bandwidth (GB/s)", spec)
                                        : kAssumedRamBandwidthGbps;
  return {parse_size(parts[0], 1024), gbps};
}

HardwareProfile make_hardware_profile(const HardwareOverrides& overrides,
                                      const ProbeOptions& probe) {
  HardwareProfile hw;
  hw.cpu_model = cpu_model_name();
  hw.simd = cpu_features().describe();
  hw.physical_cores = overrides.cores ? *overrides.cores : physical_core_count();
  STRATA_CHECK(hw.physical_cores > 0 && hw.physical_cores <= 4096,
               "--cores: expected 1..4096, found {}", hw.physical_cores);
  if (overrides.ram) {
    const auto [bytes, gbps] = parse_ram_spec(*overrides.ram);
    hw.ram_total_bytes = hw.ram_available_bytes = bytes;
    hw.ram_bandwidth_gbps = gbps;
    hw.ram_bandwidth_source =
        overrides.ram->find(':') != std::string::npos
            ? "given"
            : "assumed: dual-channel DDR4-3200 read at 70%; give --ram SIZE:GB/s for yours";
  } else {
    const SystemMemory memory = system_memory();
    hw.ram_total_bytes = memory.total_bytes;
    hw.ram_available_bytes = memory.available_bytes ? memory.available_bytes : memory.total_bytes;
    fill_ram_bandwidth(hw, probe);
  }
  if (overrides.gpus.empty()) {
    if (probe.probe_gpus) hw.gpus = probe.probe_gpus(probe);
  } else if (!(overrides.gpus.size() == 1 && overrides.gpus[0] == "none")) {
    for (const auto& spec : overrides.gpus) hw.gpus.push_back(parse_gpu_spec(spec));
  }
  if (overrides.hop_latency_ms) {
    STRATA_CHECK(*overrides.hop_latency_ms >= 0 && *overrides.hop_latency_ms < 1000,
                 "--hop-ms: expected 0..1000, found {}", *overrides.hop_latency_ms);
    hw.hop_latency_ms = *overrides.hop_latency_ms;
  }
  hw.hypothetical =
      overrides.ram || overrides.cores || !overrides.gpus.empty() || overrides.hop_latency_ms;
  const int threads = probe.calibration.threads;
  STRATA_CHECK(threads >= 0 && threads <= 4096, "-t: expected 1..4096, found {}", threads);
  hw.threads = threads > 0 ? threads : hw.physical_cores;
  if (probe.calibrate && !overrides.ram && !overrides.cores) {
    CalibrationOptions options = probe.calibration;
    options.threads = hw.threads;
    const std::string path =
        probe.cache_path.empty() ? default_hardware_cache_path() : probe.cache_path;
    hw.cpu_calibration = cached_cpu_calibration(path, hw.cpu_model, options, probe.remeasure);
    if (hw.ram_bandwidth_source.rfind("cached", 0) == 0 && slower_than_calibration(hw, options)) {
      log::warn(
          "the cached RAM bandwidth ({:.1f} GB/s) is below what the CPU calibration just read "
          "from RAM: it was measured while the machine was busy; measuring it again",
          hw.ram_bandwidth_gbps);
      ProbeOptions again = probe;
      again.remeasure = true;
      fill_ram_bandwidth(hw, again);
    }
  }
  return hw;
}

}  // namespace strata::plan
