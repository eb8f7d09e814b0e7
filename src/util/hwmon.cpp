#include "util/hwmon.h"

#include <array>
#include <fstream>
#include <string_view>

namespace strata {
namespace {

namespace fs = std::filesystem;

std::optional<std::string> read_line(const fs::path& p) {
  std::ifstream f(p);
  std::string line;
  if (!f || !std::getline(f, line)) return std::nullopt;
  return line;
}

// Whether tempN of driver `name`, labelled `label` (empty: none), measures the package.
bool package_sensor(std::string_view name, std::string_view label) {
  if (name == "k10temp" || name == "zenpower")
    return label.empty() || label == "Tctl" || label == "Tdie";
  if (name == "coretemp") return label.starts_with("Package id");
  return name == "cpu_thermal" || name == "soc_thermal" || name == "cpu-thermal";
}

}  // namespace

std::optional<CpuTemperature> cpu_temperature(const fs::path& root) {
  std::optional<CpuTemperature> best;
  std::error_code ec;
  for (const auto& dir : fs::directory_iterator(root, ec)) {
    const auto name = read_line(dir.path() / "name");
    if (!name) continue;
    for (int i = 1; i <= 32; ++i) {
      const std::string temp = "temp" + std::to_string(i);
      const auto input = read_line(dir.path() / (temp + "_input"));
      if (!input) continue;
      const std::string label = read_line(dir.path() / (temp + "_label")).value_or("");
      if (!package_sensor(*name, label)) continue;
      double millidegrees = 0;
      try {
        millidegrees = std::stod(*input);
      } catch (const std::exception&) {
        continue;
      }
      const double celsius = millidegrees / 1000.0;
      if (!best || celsius > best->celsius)
        best = CpuTemperature{celsius, label.empty() ? *name : *name + " " + label};
    }
  }
  return best;
}

}  // namespace strata
