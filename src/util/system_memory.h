#pragma once
// This machine's RAM and this process's share of it, from /proc (zeros where unreadable).

#include <cstdint>

namespace strata {

struct SystemMemory {
  uint64_t total_bytes = 0;      // MemTotal
  uint64_t available_bytes = 0;  // MemAvailable: what new allocations can have without swapping
  uint64_t process_resident_bytes = 0;  // this process's resident set (mapped weights included)
};

SystemMemory system_memory();

}  // namespace strata
