#include "ops/compact_tiles.h"

#include <cstring>
#include <vector>

#include "quant/quant.h"

namespace strata::ops {

bool CompactTiles::fits(const WeightMatrix& w, int64_t row_group) {
  if (!w.data || w.rows <= 0 || w.tiles || w.compact || !quant::is_supported(w.type)) return false;
  const quant::PackedTileKernels& k = quant::traits(w.type).kernels.compact;
  return k.pack && kCompactTileRows % k.rows == 0 && row_group > 0 && row_group % k.rows == 0 &&
         w.rows % row_group == 0 && k.bytes(w.cols) == k.rows * w.row_bytes;
}

bool CompactTiles::convert(WeightMatrix& w, int64_t row_group) {
  if (w.data && done_.count(w.data)) {
    w.compact = true;
    return true;
  }
  if (!fits(w, row_group)) return w.compact;
  const quant::PackedTileKernels& k = quant::traits(w.type).kernels.compact;
  const int64_t tile_bytes = k.bytes(w.cols);
  // Each tile takes the place of its own rows: copy them out, pack them back.
  std::vector<uint8_t> rows(static_cast<size_t>(tile_bytes));
  auto* data = const_cast<uint8_t*>(w.data);  // writable: the caller's promise
  for (int64_t r0 = 0; r0 < w.rows; r0 += k.rows) {
    uint8_t* tile = data + r0 * w.row_bytes;
    std::memcpy(rows.data(), tile, rows.size());
    k.pack(w.cols, rows.data(), w.row_bytes, k.rows, tile);
  }
  w.compact = true;
  done_.insert(w.data);
  bytes_ += w.bytes();
  return true;
}

}  // namespace strata::ops
