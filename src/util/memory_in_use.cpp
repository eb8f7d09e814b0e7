#include "util/memory_in_use.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "util/format_bytes.h"

namespace strata {

std::string memory_in_use_note(const std::string& label, uint64_t total, uint64_t free,
                               std::vector<GpuProcess> processes) {
  const uint64_t used = total > free ? total - free : 0;
  if (used < std::max(kMemoryInUseNoteBytes, total / 20)) return "";
  std::sort(processes.begin(), processes.end(),
            [](const GpuProcess& a, const GpuProcess& b) { return a.used_bytes > b.used_bytes; });
  std::vector<std::string> named;
  for (const GpuProcess& p : processes) {
    named.push_back(
        fmt::format("{} (pid {}){}", p.name.empty() ? "?" : p.name, p.pid,
                    p.used_bytes ? fmt::format(" {}", format_bytes(p.used_bytes)) : ""));
  }
  const std::string who = named.empty() ? "" : fmt::format(": {}", fmt::join(named, ", "));
  return fmt::format(
      "{}: {} of its {} is in use by other processes{}; strata plans for the {} free. Stop them "
      "to give strata the whole GPU (a crashed run can leave one behind), or plan for a size of "
      "your own with --vram-budget",
      label, format_bytes(used), format_bytes(total), who, format_bytes(free));
}

}  // namespace strata
