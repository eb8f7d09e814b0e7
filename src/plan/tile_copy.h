#pragma once
// RAM the CPU executor adds to a model's weights: when the file's weight matrices stay in cache
// (under ops::kStreamedWeightBytes, the rule of apply_matmul_settings), the model packs every
// matrix of its layers and its output head into GEMM tiles once (ops::PackedTiles), a copy of
// 1.06x (Q8_0) to 2x (4-bit types) of their bytes. A GPU plan's CPU half is a whole-file model
// too, so the copy is the same whatever the placement.

#include <cstdint>

#include "plan/inventory.h"

namespace strata::plan {

// Bytes of the tiles this CPU's kernels pack for the model (0 where its weights stream from RAM
// or no type of it has packed tiles here).
uint64_t packed_tile_copy_bytes(const ModelInventory& inv);

}  // namespace strata::plan
