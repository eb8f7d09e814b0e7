#pragma once
// Published memory sizes and bandwidths of the GPUs people plan for, so `strata plan --gpu
// "RTX 3060"` needs no GB/s figure, and the typical figures assumed when only a size is given
// (`--gpu 8G`, `--ram 32G`), each with the assumption said.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata::plan {

struct CatalogGpu {
  std::string_view name;  // as vendors write it: "RTX 3060", "RX 7900 XTX"
  double vram_gib = 0;
  double bandwidth_gbps = 0;  // the vendor's memory bandwidth, GB/s
};

// The entry for `name` (case, spaces and vendor words such as GeForce or Radeon ignored;
// "RTX 4060 Ti" and "rtx4060ti" match); nullopt for an unknown GPU.
std::optional<CatalogGpu> find_catalog_gpu(std::string_view name);
// A few names, for the error that lists what is known.
std::vector<std::string_view> catalog_gpu_names();

// Assumed when --gpu gives a size only: an RTX 2070-class card (GDDR6 on a 256-bit bus).
constexpr double kAssumedGpuBandwidthGbps = 448;
// Assumed when --ram gives a size only: dual-channel DDR4-3200 (51.2 GB/s peak) read at 70%, what
// desktop machines measure (FIELD C2 measured 65% of its single-channel DDR5-5600 peak).
constexpr double kAssumedRamBandwidthGbps = 35.8;

}  // namespace strata::plan
