#pragma once
// Weight matrices rewritten in place into their type's compact tiles (MatmulSettings::
// compact_tiles, quant::TypeKernels::compact): 4 or 8 rows interleaved the way the tile GEMM
// reads them, codes and scales kept at the format's width, in exactly the bytes of those rows. A
// decode GEMV on them does about half the instructions of the row kernels (no horizontal sums, no
// scale shuffles), which is what bounds decode where RAM is fast; the results keep their bits.
// Irreversible: the rows are gone, so only a model whose weights are its own copy rewrites them.

#include <cstdint>
#include <unordered_set>

#include "ops/matmul.h"

namespace strata::ops {

class CompactTiles {
 public:
  // Whether w's type has compact tiles that fit in place, with `row_group` rows per part that is
  // used alone (an expert of a stacked expert tensor; w.rows for a plain matrix) a multiple of
  // the tile's rows.
  static bool fits(const WeightMatrix& w, int64_t row_group);
  // Rewrites w's rows into compact tiles and marks it, when it fits; a matrix whose data was
  // rewritten already (another view of the same rows) is only marked. w.data must be writable.
  // Returns whether w is compact now.
  bool convert(WeightMatrix& w, int64_t row_group);
  int64_t bytes() const { return bytes_; }  // rewritten so far

 private:
  std::unordered_set<const uint8_t*> done_;
  int64_t bytes_ = 0;
};

}  // namespace strata::ops
