#pragma once
// The CPU's package temperature from Linux's hwmon (sysfs), where a driver for it is loaded.

#include <filesystem>
#include <optional>
#include <string>

namespace strata {

struct CpuTemperature {
  double celsius = 0;
  std::string sensor;  // e.g. "k10temp Tctl", "coretemp Package id 0"
};

// The hottest package sensor under `root` (normally /sys/class/hwmon): k10temp and zenpower
// (AMD), coretemp (Intel) and the SoC thermal drivers of ARM boards. Nothing when none is found
// or readable.
std::optional<CpuTemperature> cpu_temperature(
    const std::filesystem::path& root = "/sys/class/hwmon");

}  // namespace strata
