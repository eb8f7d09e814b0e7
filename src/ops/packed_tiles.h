#pragma once
// Weight matrices packed ahead into their GEMM tiles (MatmulSettings::pack_tiles): the tiles are
// owned here and the matrices point at them (WeightMatrix::tiles), so products of a few tokens on
// weights that stay in cache skip the repack a tile GEMM otherwise does every time.

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "ops/matmul.h"

namespace strata::ops {

class PackedTiles {
 public:
  PackedTiles() = default;
  PackedTiles(const PackedTiles&) = delete;
  PackedTiles& operator=(const PackedTiles&) = delete;
  ~PackedTiles() { unpack(); }

  // Packs w's rows and points w at them; nothing for a type without packed tiles, an empty
  // matrix or one packed already. w must outlive the packing (or unpack() come first).
  void pack(WeightMatrix& w);
  // Points every packed matrix back at its rows alone and frees the tiles.
  void unpack();
  int64_t bytes() const { return bytes_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  struct Entry {
    WeightMatrix* matrix;
    std::unique_ptr<uint8_t, Free> tiles;
  };
  std::vector<Entry> packed_;
  int64_t bytes_ = 0;
};

}  // namespace strata::ops
