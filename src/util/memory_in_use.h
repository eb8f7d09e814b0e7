#pragma once
// What a user is told when other processes hold memory on the GPU strata is about to load onto
// (a crashed run left behind, a desktop, another server): how much, who, and what strata does.

#include <cstdint>
#include <string>
#include <vector>

#include "util/nvml.h"

namespace strata {

// Other processes hold less than this (and less than 1/20 of the GPU): not worth a word.
constexpr uint64_t kMemoryInUseNoteBytes = uint64_t{256} << 20;

// The note for GPU `label` with `total` bytes of which `free` are free to strata, naming the
// `processes` NVML lists on it (largest first); empty when little is in use.
std::string memory_in_use_note(const std::string& label, uint64_t total, uint64_t free,
                               std::vector<GpuProcess> processes);

}  // namespace strata
