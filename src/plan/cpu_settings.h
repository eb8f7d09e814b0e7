#pragma once
// The run-time settings of a CPU-only run, chosen from the model's bytes and the machine's free
// memory (what `strata serve` and `strata bench` use unless told otherwise):
// - threads: the physical cores (FIELD C2: hyper-threads were 11% slower; decode is bandwidth
//   bound and one thread per core already saturates it);
// - weights read into RAM when they, the KV cache and the OS reserve fit in available memory
//   (C2: +34% prompt processing over mmap, and no page faults mid-generation), else mapped;
// - an f16 KV cache when it fits, else q8_0 (half the bytes, a small accuracy cost).

#include <cstdint>
#include <string>

#include "gguf/ggml_type.h"
#include "plan/inventory.h"
#include "util/mapped_file.h"

namespace strata::plan {

struct CpuRunSettings {
  int threads = 1;
  LoadMode load = LoadMode::mmap;
  GgmlType kv_type = GgmlType::F16;
  std::string reason;  // one line, for the log
};

// kv_positions: positions of KV cache the run keeps (all sequences). Throws strata::Error when
// even a q8_0 cache of that size does not fit, naming the sizes.
CpuRunSettings choose_cpu_settings(const ModelInventory& inventory, uint64_t ram_available_bytes,
                                   int physical_cores, int64_t kv_positions,
                                   uint64_t os_reserve_bytes = uint64_t{1} << 30);

}  // namespace strata::plan
