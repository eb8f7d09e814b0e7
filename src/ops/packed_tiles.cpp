#include "ops/packed_tiles.h"

#include "quant/quant.h"
#include "util/error.h"

namespace strata::ops {

void PackedTiles::pack(WeightMatrix& w) {
  if (!w.data || w.rows <= 0 || w.tiles || w.compact || !quant::is_supported(w.type)) return;
  const quant::PackedTileKernels& k = quant::traits(w.type).kernels.packed;
  if (!k.pack) return;
  const int64_t tile_bytes = k.bytes(w.cols);
  const int64_t n_tiles = (w.rows + k.rows - 1) / k.rows;
  // aligned_alloc wants a multiple of the alignment; a tile is whole 64-byte blocks anyway.
  const auto size = static_cast<size_t>((n_tiles * tile_bytes + 63) / 64 * 64);
  std::unique_ptr<uint8_t, Free> tiles(static_cast<uint8_t*>(std::aligned_alloc(64, size)));
  STRATA_CHECK(tiles != nullptr, "out of memory packing a {} x {} weight matrix into tiles", w.rows,
               w.cols);
  k.pack(w.cols, w.data, w.row_bytes, w.rows, tiles.get());
  w.tiles = tiles.get();
  w.tile_rows = k.rows;
  w.tile_bytes = tile_bytes;
  bytes_ += static_cast<int64_t>(size);
  packed_.push_back({&w, std::move(tiles)});
}

void PackedTiles::unpack() {
  for (Entry& e : packed_) {
    e.matrix->tiles = nullptr;
    e.matrix->tile_rows = e.matrix->tile_bytes = 0;
  }
  packed_.clear();
  bytes_ = 0;
}

}  // namespace strata::ops
