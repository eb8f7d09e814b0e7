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

#include "quant/quant.h"

namespace strata::quant {
namespace {

constexpr int kMaxTileRows = 8;

// Columns per pass over the row tiles: as many as keep their activations (about 1.1 bytes a value)
// within kColumnChunkBytes, so they stay in L2 while every tile of the row block meets them, and
// at least 64; each pass repacks the tiles again. 512 KiB (256 columns of 2048 values) measured
// 5-15% faster than 64 columns on a 512-token product (Zen 5, one core).
constexpr int64_t kColumnChunkBytes = int64_t{512} << 10;
inline int64_t column_chunk(int64_t n) {
  return std::max<int64_t>(64, kColumnChunkBytes / n);
}

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
int64_t tile_groups(int64_t n) {
  const int64_t nb = n / Format::kBlockElems;
  return (nb + Format::kGroupBlocks - 1) / Format::kGroupBlocks;
}

// The column loop shared by both kinds of product: tile_of(r0, rows) gives the tile of rows
// [r0, r0 + rows) (repacked into a buffer, or packed ahead).
template <typename Format, typename TileOf>
void gemm_over_tiles(int64_t n, int64_t n_rows, const uint8_t* const* act, int64_t n_cols,
                     float* out, int64_t out_stride, TileOf tile_of) {
  using ColumnBlock = typename Format::ColumnBlock;
  constexpr int kRows = Format::kRows;
  static_assert(kRows <= kMaxTileRows);
  const int64_t nb = n / Format::kBlockElems;
  const int64_t groups = tile_groups<Format>(n);
  thread_local std::vector<ColumnBlock> prepared;
  thread_local std::vector<const ColumnBlock*> column;
  const int64_t max_chunk = column_chunk(n);
  for (int64_t c0 = 0; c0 < n_cols; c0 += max_chunk) {
    const int64_t chunk = std::min(max_chunk, n_cols - c0);
    prepared.resize(static_cast<size_t>(chunk * groups));
    column.resize(static_cast<size_t>(chunk));
    for (int64_t c = 0; c < chunk; ++c) {
      column[static_cast<size_t>(c)] = prepared.data() + c * groups;
      Format::prepare(act[c0 + c], nb, prepared.data() + c * groups);
    }
    for (int64_t r0 = 0; r0 < n_rows; r0 += kRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kRows, n_rows - r0));
      run_columns<Format>(tile_of(r0, rows), groups, act + c0, column.data(), chunk,
                          out + c0 * out_stride + r0, out_stride, rows);
    }
  }
}

// Repacks the tile of `rows` rows from `first` (a short tile repeats its first row; run stores
// only the real rows).
template <typename Format>
void repack_rows(const uint8_t* first, int64_t w_stride, int rows, int64_t nb,
                 typename Format::TileBlock* tile) {
  const uint8_t* row_ptr[Format::kRows];
  for (int r = 0; r < Format::kRows; ++r) row_ptr[r] = first + (r < rows ? r : 0) * w_stride;
  Format::repack(row_ptr, nb, tile);
}

template <typename Format>
void gemm_tiles(int64_t n, const void* weights, int64_t w_stride, int64_t n_rows,
                const uint8_t* const* act, int64_t n_cols, float* out, int64_t out_stride) {
  using TileBlock = typename Format::TileBlock;
  thread_local std::vector<TileBlock> tile;
  tile.resize(static_cast<size_t>(tile_groups<Format>(n)));
  const auto* w = static_cast<const uint8_t*>(weights);
  const int64_t nb = n / Format::kBlockElems;
  gemm_over_tiles<Format>(n, n_rows, act, n_cols, out, out_stride, [&](int64_t r0, int rows) {
    repack_rows<Format>(w + r0 * w_stride, w_stride, rows, nb, tile.data());
    return static_cast<const TileBlock*>(tile.data());
  });
}

template <typename Format>
int64_t packed_tile_bytes(int64_t n) {
  return tile_groups<Format>(n) * static_cast<int64_t>(sizeof(typename Format::TileBlock));
}

// kCount values of 6 bits (u[i] < 64) in 3/4 of the bytes, for compact tiles: low[b] = low 4
// bits of u[b] (low nibble) and u[b + kCount / 2] (high), high[b] = bits 4-5 of u[b + kCount / 4
// * k] at bits 2k, 2k + 1.
template <int kCount>
void pack_six_bits(const uint8_t* u, uint8_t* low, uint8_t* high) {
  for (int b = 0; b < kCount / 2; ++b)
    low[b] = static_cast<uint8_t>((u[b] & 0x0f) | ((u[b + kCount / 2] & 0x0f) << 4));
  for (int b = 0; b < kCount / 4; ++b) {
    int h = 0;
    for (int k = 0; k < 4; ++k) h |= ((u[b + kCount / 4 * k] >> 4) & 3) << (2 * k);
    high[b] = static_cast<uint8_t>(h);
  }
}

// Bytes of one tile of rows of n values: a format's own tile_bytes(n) where it has one (tiles
// whose last group is shorter), else whole TileBlocks.
template <typename Format>
int64_t format_tile_bytes(int64_t n) {
  if constexpr (requires { Format::tile_bytes(n); }) {
    return Format::tile_bytes(n);
  } else {
    return packed_tile_bytes<Format>(n);
  }
}

template <typename Format>
void pack_tiles(int64_t n, const void* weights, int64_t w_stride, int64_t n_rows, uint8_t* tiles) {
  using TileBlock = typename Format::TileBlock;
  const auto* w = static_cast<const uint8_t*>(weights);
  const int64_t nb = n / Format::kBlockElems;
  for (int64_t r0 = 0; r0 < n_rows; r0 += Format::kRows) {
    const int rows = static_cast<int>(std::min<int64_t>(Format::kRows, n_rows - r0));
    auto* tile =
        reinterpret_cast<TileBlock*>(tiles + r0 / Format::kRows * format_tile_bytes<Format>(n));
    repack_rows<Format>(w + r0 * w_stride, w_stride, rows, nb, tile);
  }
}

template <typename Format>
void gemm_packed_tiles(int64_t n, const uint8_t* tiles, int64_t n_rows, const uint8_t* const* act,
                       int64_t n_cols, float* out, int64_t out_stride) {
  using TileBlock = typename Format::TileBlock;
  const int64_t stride = format_tile_bytes<Format>(n);
  gemm_over_tiles<Format>(n, n_rows, act, n_cols, out, out_stride, [&](int64_t r0, int) {
    return reinterpret_cast<const TileBlock*>(tiles + r0 / Format::kRows * stride);
  });
}

// Products on a compact format's tiles (TypeKernels::compact): up to Format::kMaxColumns columns
// straight from them (decode, short verify steps); more (a prompt) on the byte tiles of
// Format::Bytes, expanded once per block of rows (Format::expand_block) so that every column
// group reuses them, as the tile GEMM does.
template <typename Format>
void gemm_compact(int64_t n, const uint8_t* tiles, int64_t n_rows, const uint8_t* const* act,
                  int64_t n_cols, float* out, int64_t out_stride) {
  using Bytes = typename Format::Bytes;
  if (n_cols <= Format::kMaxColumns) {
    gemm_packed_tiles<Format>(n, tiles, n_rows, act, n_cols, out, out_stride);
    return;
  }
  const int64_t nb = n / Format::kBlockElems;
  const int64_t stride = format_tile_bytes<Format>(n);
  thread_local std::vector<typename Bytes::TileBlock> expanded;
  expanded.resize(static_cast<size_t>(tile_groups<Bytes>(n)));
  gemm_over_tiles<Bytes>(n, n_rows, act, n_cols, out, out_stride, [&](int64_t r0, int rows) {
    Format::expand_block(tiles, stride, r0, rows, nb, expanded.data());
    return static_cast<const typename Bytes::TileBlock*>(expanded.data());
  });
}

template <typename Format>
void set_compact_kernels(TypeKernels& k) {
  k.compact = {Format::kRows, format_tile_bytes<Format>, pack_tiles<Format>, gemm_compact<Format>};
}

// The tile GEMM of a format and its packed-ahead twin.
template <typename Format>
void set_tile_kernels(TypeKernels& k) {
  k.gemm = gemm_tiles<Format>;
  k.packed = {Format::kRows, packed_tile_bytes<Format>, pack_tiles<Format>,
              gemm_packed_tiles<Format>};
}

}  // namespace
}  // namespace strata::quant
