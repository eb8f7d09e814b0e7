#include "plan/cpu_settings.h"

#include <fmt/format.h>

#include "util/error.h"

namespace strata::plan {
namespace {

std::string gib(uint64_t bytes) {
  return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1u << 30));
}

}  // namespace

CpuRunSettings choose_cpu_settings(const ModelInventory& inventory, uint64_t ram_available_bytes,
                                   int physical_cores, int64_t kv_positions,
                                   uint64_t os_reserve_bytes) {
  STRATA_CHECK(kv_positions > 0, "KV positions must be positive, got {}", kv_positions);
  CpuRunSettings s;
  s.threads = std::max(1, physical_cores);
  const uint64_t weights = inventory.total_bytes();
  const auto positions = static_cast<uint64_t>(kv_positions);
  const uint64_t kv_f16 = inventory.kv_bytes_per_token(2.0) * positions;
  const uint64_t kv_q8 = inventory.kv_bytes_per_token(34.0 / 32.0) * positions;
  const uint64_t usable =
      ram_available_bytes > os_reserve_bytes ? ram_available_bytes - os_reserve_bytes : 0;
  if (kv_f16 <= usable) {
    s.kv_type = GgmlType::F16;
  } else if (kv_q8 <= usable) {
    s.kv_type = GgmlType::Q8_0;
  } else {
    fail(
        "a KV cache of {} positions needs {} even as q8_0, but only {} of RAM is available "
        "(after {} for the system): lower --ctx or --kv-size",
        kv_positions, gib(kv_q8), gib(usable), gib(os_reserve_bytes));
  }
  const uint64_t kv = s.kv_type == GgmlType::F16 ? kv_f16 : kv_q8;
  s.load = weights + kv <= usable ? LoadMode::ram : LoadMode::mmap;
  s.reason = fmt::format(
      "{} threads; weights {} ({}); KV {} for {} positions ({}); {} of RAM available", s.threads,
      s.load == LoadMode::ram ? "read into RAM" : "mapped from the file", gib(weights),
      s.kv_type == GgmlType::F16 ? "f16" : "q8_0", kv_positions, gib(kv), gib(usable));
  return s;
}

}  // namespace strata::plan
