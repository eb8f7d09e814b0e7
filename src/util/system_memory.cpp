#include "util/system_memory.h"

#include <unistd.h>

#include <fstream>
#include <string>

namespace strata {

SystemMemory system_memory() {
  SystemMemory m;
  {
    std::ifstream in("/proc/meminfo");  // values in kB (KiB)
    std::string key, unit;
    uint64_t value = 0;
    while (in >> key >> value) {
      std::getline(in, unit);
      if (key == "MemTotal:") m.total_bytes = value * 1024;
      if (key == "MemAvailable:") m.available_bytes = value * 1024;
    }
  }
  std::ifstream statm("/proc/self/statm");  // size and resident, in pages
  uint64_t size = 0, resident = 0;
  if (statm >> size >> resident)
    m.process_resident_bytes = resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return m;
}

}  // namespace strata
