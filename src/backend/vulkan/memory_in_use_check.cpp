#include "backend/vulkan/memory_in_use_check.h"

#include <fmt/format.h>

#include <mutex>
#include <set>

#include "util/log.h"
#include "util/memory_in_use.h"
#include "util/nvml.h"

namespace strata::vk {

void warn_memory_in_use(const DeviceInfo& d) {
  // Without VK_EXT_memory_budget the budget is the heap size: nothing to tell.
  if (d.is_cpu || !d.has_memory_budget) return;
  static std::mutex mutex;
  static std::set<int> warned;
  {
    std::lock_guard lock(mutex);
    if (!warned.insert(d.index).second) return;
  }
  std::vector<GpuProcess> processes;
  if (const auto nvml = Nvml::open()) {
    for (const GpuTelemetry& g : nvml->sample())
      if (g.uuid == d.uuid) processes = nvml->processes(g.index);
  }
  const std::string note =
      memory_in_use_note(fmt::format("vk{} ({})", d.index, d.name), d.device_local_bytes,
                         d.device_local_budget, std::move(processes));
  if (!note.empty()) log::warn("{}", note);
}

}  // namespace strata::vk
