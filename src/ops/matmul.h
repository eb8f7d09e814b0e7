#pragma once
// Matrix products on quantized weights, computed on the packed blocks (never dequantizing whole
// matrices): activations are quantized once per row to the weight type's partner format, then
// each output is one vec_dot. Work is split by blocks of weight rows; within a block, tokens are
// tiled so the block's rows stay in cache while every token's activation passes over them.

#include <cstdint>
#include <span>
#include <vector>

#include "gguf/ggml_type.h"
#include "util/thread_pool.h"

namespace strata::ops {

// A 2-D view of quantized weights: `rows` rows of `cols` elements, row-major.
struct WeightMatrix {
  GgmlType type = GgmlType::F32;
  const uint8_t* data = nullptr;
  int64_t cols = 0;
  int64_t rows = 0;
  int64_t row_bytes = 0;

  // Optional: the rows packed ahead into the type's GEMM tiles (quant::PackedTileKernels), tile
  // t (rows [t * tile_rows, t * tile_rows + tile_rows)) at tiles + t * tile_bytes. Null:
  // products of many tokens repack rows as they go.
  const uint8_t* tiles = nullptr;
  int64_t tile_rows = 0;
  int64_t tile_bytes = 0;

  // The rows rewritten in place into the type's compact tiles (quant::TypeKernels::compact,
  // ops/compact_tiles.h): the tile of rows [r, r + compact rows) lies where those rows were, at
  // row(r), so row blocks and slices that start a tile still address it; single rows do not.
  bool compact = false;

  const uint8_t* row(int64_t r) const { return data + r * row_bytes; }
  int64_t bytes() const { return rows * row_bytes; }
  // Rows [first, first + count): e.g. one expert of a [cols, rows_per_expert, n_expert] tensor.
  // Keeps the packed tiles where `first` starts a tile (compact tiles: first starts one).
  WeightMatrix slice(int64_t first, int64_t count) const {
    const bool tiled = tiles && first % tile_rows == 0;
    return {type,
            data + first * row_bytes,
            cols,
            count,
            row_bytes,
            tiled ? tiles + first / tile_rows * tile_bytes : nullptr,
            tiled ? tile_rows : 0,
            tiled ? tile_bytes : 0,
            compact};
  }
};

// Rows of activations quantized to one type (the partner of the weights they meet).
class QuantizedRows {
 public:
  // Quantizes n_rows rows of `cols` floats (row i at x + i * x_stride) to `type`.
  void quantize(const float* x, int64_t n_rows, int64_t cols, int64_t x_stride, GgmlType type);
  // Room for n_rows rows of `cols` values of `type`, for quantize_rows to fill.
  void shape(int64_t n_rows, int64_t cols, GgmlType type);
  // Quantizes rows [first, first + n) from x (row first + i at x + i * x_stride); threads may
  // fill different rows at once.
  void quantize_rows(const float* x, int64_t first, int64_t n, int64_t x_stride);

  GgmlType type() const { return type_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  const uint8_t* row(int64_t i) const { return data_.data() + i * row_bytes_; }
  int64_t row_bytes() const { return row_bytes_; }

 private:
  GgmlType type_ = GgmlType::F32;
  int64_t rows_ = 0;
  int64_t cols_ = 0;
  int64_t row_bytes_ = 0;
  std::vector<uint8_t> data_;
};

// From how many tokens the tile GEMM beats the multi-row dot products (vec_dot_multi) depends on
// where the weights come from. From caches, the repack costs about one token's vec_dot_multi:
// tiles win from 3 tokens (bench_quant_dot gemm/*/small_expert_*; the trained model's verify
// steps of 3-8 tokens 10-25% faster than with multi). Streamed from RAM, the repack's arithmetic
// comes on top of the stream: Qwen3-30B-A3B-shaped steps of 3-7 tokens ran 1.2-1.5x slower with
// tiles, 8 broke even (bench --verify, Zen 5, 2 threads). CPU weights of 64 MiB or more stream.
constexpr int64_t kStreamedWeightBytes = int64_t{64} << 20;
constexpr int64_t kTileMinTokensResident = 3;
constexpr int64_t kTileMinTokensStreamed = 8;
int64_t tile_min_tokens(int64_t cpu_weight_bytes);
// Rows packed ahead (WeightMatrix::tiles) cost no repack, and the tiles win from one token: on the
// trained model (Zen 5, 2 threads) a decode step took 0.126-0.128 ms on them against 0.163-0.166
// with the row-by-row kernels, a 2-token step 0.172-0.187 against 0.192-0.196.
constexpr int64_t kPackedTileMinTokens = 1;

// How products run. Results are bit-identical whatever the settings; the caller (a model, a
// benchmark) holds them and passes them to each product.
struct MatmulSettings {
  // Products of tile_min_tokens tokens or more repack weight rows into interleaved tiles (the
  // fast prefill path; tile_min_tokens() says from how many). Off: `--repack off`, for A/B runs.
  bool tile_gemm = true;
  int64_t tile_min_tokens = kTileMinTokensResident;
  // Weights that stay in cache (CPU weights under kStreamedWeightBytes) are packed into tiles
  // once, by the model that holds them; products on them use the tiles from packed_min_tokens.
  bool pack_tiles = false;
  int64_t packed_min_tokens = kPackedTileMinTokens;
  // Single-token products (decode GEMVs) issue software prefetches a few KiB ahead of the row
  // being computed, besides the hardware prefetchers; whether it pays depends on the machine
  // (gemv_prefetch.h measures it).
  bool gemv_prefetch = false;
  // Matrices streamed from RAM whose type has compact tiles are rewritten into them once, in
  // place, by the model that holds them (where its weights are its own copy: LoadMode::ram);
  // every product on them then runs on the tiles, decode included. Off for weights packed into
  // byte tiles (pack_tiles), which are faster where the weights stay in cache.
  bool compact_tiles = false;
};

// out[t * out_stride + r] = w.row(r) . a.row(t) for r in [row_begin, row_end), every t.
void matmul_rows(const WeightMatrix& w, const QuantizedRows& a, float* out, int64_t out_stride,
                 int64_t row_begin, int64_t row_end, const MatmulSettings& settings);

// out[i * out_stride + r] = w.row(r) . a.row(ids[i]) for i in [0, n_ids): a subset of the
// activation rows (e.g. the tokens routed to one expert).
void matmul_rows_indexed(const WeightMatrix& w, const QuantizedRows& a, const int32_t* ids,
                         int64_t n_ids, float* out, int64_t out_stride, int64_t row_begin,
                         int64_t row_end, const MatmulSettings& settings);

// The whole product, split over the pool by blocks of weight rows.
void matmul(const WeightMatrix& w, const QuantizedRows& a, float* out, int64_t out_stride,
            ThreadPool& pool, const MatmulSettings& settings);

// Products of at most this many multiply-adds in all run on the calling thread: a decode step's
// router (16 x 256 on the trained model, a few microseconds) costs less there than the pool's
// round trip.
constexpr int64_t kInlineMatmulMacs = 16 << 10;

// Several whole products in one pool run (their blocks of weight rows share it): products of the
// same rows by a layer's q, k and v matrices meet at one barrier instead of three.
struct MatmulPart {
  const WeightMatrix* w;
  const QuantizedRows* a;
  float* out;
  int64_t out_stride;
};
void matmul_together(std::span<const MatmulPart> parts, ThreadPool& pool,
                     const MatmulSettings& settings);

// Rows per work item: enough to amortize scheduling, few enough to balance threads. n_matrices
// matrices of w's shape share one pool run (the selected experts of a MoE layer): in a step of at
// most kSharedBlockMaxTokens tokens the items of all of them together balance the threads, so
// each matrix is cut into fewer blocks.
constexpr int64_t kSharedBlockMaxTokens = 16;
int64_t matmul_row_block(const WeightMatrix& w, int64_t n_tokens, int n_threads,
                         int64_t n_matrices = 1);
// Rows of every compact tile (quant::TypeKernels::compact: 4 or 8) divide this; row blocks are
// multiples of it.
constexpr int64_t kCompactTileRows = 8;

}  // namespace strata::ops
