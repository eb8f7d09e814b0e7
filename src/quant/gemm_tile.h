#pragma once
// Family-private driver of the tile GEMMs (TypeKernels::gemm): repacks Format::kRows consecutive
// weight rows into a thread-local interleaved tile, then runs a kernel over groups of columns that
// reuses every tile vector for all columns of the group held in registers. A format is a class
// with
//   static constexpr int kRows;         // weight rows per tile (at most kMaxTileRows)
//   static constexpr int kGroupBlocks;  // blocks per TileBlock / ColumnBlock
//   using TileBlock = ...;    // kGroupBlocks weight blocks of the kRows rows, interleaved
//   using ColumnBlock = ...;  // what the kernel needs per activation group beyond the blocks
//   static constexpr int kMaxColumns;  // columns per group (as many as registers allow)
//   static void repack(const uint8_t* const* rows, int64_t nb, TileBlock* tile);
//   static void prepare(const uint8_t* act, int64_t nb, ColumnBlock* column);
//   template <int N> static void run(const TileBlock* tile, int64_t groups,
//                                    const uint8_t* const* act, const ColumnBlock* const* column,
//                                    float* out, int64_t out_stride, int n_rows);
// repack and prepare take the block count nb and pad the last group; run writes
// out[c * out_stride + r] for the first n_rows rows of the tile, c < N.
//
// Internal linkage on purpose (see kquants_common.h).

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

namespace strata::quant {
namespace {

constexpr int kMaxTileRows = 8;

// Columns per pass over the row tiles: their activations (about 2.3 KiB each for 2048 values)
// stay in L2 while every tile of the row block meets them; each pass repacks the tiles again.
constexpr int64_t kColumnChunk = 64;

// Format::run<1> .. Format::run<kMaxColumns>, indexed by column count - 1.
template <typename Format, size_t... I>
constexpr auto group_kernels(std::index_sequence<I...>) {
  return std::array{&Format::template run<static_cast<int>(I) + 1>...};
}

// Columns [0, n_cols) against one tile, in equal groups of at most kMaxColumns (7 as 4 + 3).
template <typename Format>
void run_columns(const typename Format::TileBlock* tile, int64_t n_groups,
                 const uint8_t* const* act, const typename Format::ColumnBlock* const* column,
                 int64_t n_cols, float* out, int64_t out_stride, int n_rows) {
  constexpr int kMax = Format::kMaxColumns;
  static constexpr auto kernels = group_kernels<Format>(std::make_index_sequence<kMax>());
  while (n_cols > 0) {
    const int64_t splits = (n_cols + kMax - 1) / kMax;
    const int64_t count = (n_cols + splits - 1) / splits;
    kernels[static_cast<size_t>(count - 1)](tile, n_groups, act, column, out, out_stride, n_rows);
    act += count;
    column += count;
    out += count * out_stride;
    n_cols -= count;
  }
}

template <typename Format>
void gemm_tiles(int64_t n, const void* weights, int64_t w_stride, int64_t n_rows,
                const uint8_t* const* act, int64_t n_cols, float* out, int64_t out_stride) {
  using TileBlock = typename Format::TileBlock;
  using ColumnBlock = typename Format::ColumnBlock;
  constexpr int kRows = Format::kRows;
  static_assert(kRows <= kMaxTileRows);
  const int64_t nb = n / Format::kBlockElems;
  const int64_t groups = (nb + Format::kGroupBlocks - 1) / Format::kGroupBlocks;
  thread_local std::vector<TileBlock> tile;
  thread_local std::vector<ColumnBlock> prepared;
  thread_local std::vector<const ColumnBlock*> column;
  tile.resize(static_cast<size_t>(groups));
  const auto* w = static_cast<const uint8_t*>(weights);
  for (int64_t c0 = 0; c0 < n_cols; c0 += kColumnChunk) {
    const int64_t chunk = std::min(kColumnChunk, n_cols - c0);
    prepared.resize(static_cast<size_t>(chunk * groups));
    column.resize(static_cast<size_t>(chunk));
    for (int64_t c = 0; c < chunk; ++c) {
      column[static_cast<size_t>(c)] = prepared.data() + c * groups;
      Format::prepare(act[c0 + c], nb, prepared.data() + c * groups);
    }
    for (int64_t r0 = 0; r0 < n_rows; r0 += kRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kRows, n_rows - r0));
      // A short last tile repeats its first row; run stores only the real rows.
      const uint8_t* row_ptr[kRows];
      for (int r = 0; r < kRows; ++r) row_ptr[r] = w + (r0 + (r < rows ? r : 0)) * w_stride;
      Format::repack(row_ptr, nb, tile.data());
      run_columns<Format>(tile.data(), groups, act + c0, column.data(), chunk,
                          out + c0 * out_stride + r0, out_stride, rows);
    }
  }
}

}  // namespace
}  // namespace strata::quant
