#include "ops/matmul.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>

#include "quant/quant.h"
#include "util/error.h"

namespace strata::ops {

void QuantizedRows::quantize(const float* x, int64_t n_rows, int64_t cols, int64_t x_stride,
                             GgmlType type) {
  shape(n_rows, cols, type);
  quantize_rows(x, 0, n_rows, x_stride);
}

void QuantizedRows::shape(int64_t n_rows, int64_t cols, GgmlType type) {
  const quant::TypeTraits& t = quant::traits(type);
  STRATA_CHECK(cols % t.block_elems == 0,
               "activation row of {} values is not a multiple of the {} "
               "block size {}",
               cols, t.name, t.block_elems);
  type_ = type;
  rows_ = n_rows;
  cols_ = cols;
  row_bytes_ = quant::row_bytes(type, cols);
  data_.resize(static_cast<size_t>(n_rows * row_bytes_));
}

void QuantizedRows::quantize_rows(const float* x, int64_t first, int64_t n, int64_t x_stride) {
  STRATA_CHECK(first >= 0 && first + n <= rows_, "rows {}..{} of {}", first, first + n, rows_);
  const quant::TypeTraits& t = quant::traits(type_);
  for (int64_t i = 0; i < n; ++i)
    t.kernels.quantize_row(x + i * x_stride, data_.data() + (first + i) * row_bytes_, cols_);
}

namespace {

// How far ahead of the row being computed a GEMV prefetches when software prefetch is on: 8 KiB
// gave the most (+15-20% decode) on the machine where it helped. On others it costs a third of
// the decode speed (a Zen 4 VM, 2026-12-04: hardware prefetch alone 1.5x faster), so it is off
// unless gemv_prefetch.h measured that it pays on this machine.
constexpr int64_t kPrefetchBytes = 8192;

// The activation rows one pass of vec_dot_multi keeps in L1 (of 32-48 KiB).
constexpr int64_t kMultiDotActivationBytes = int64_t{32} << 10;

// Prefetches the lines of [p, p + n) that lie before `end`.
inline void prefetch_range(const uint8_t* p, int64_t n, const uint8_t* end) {
  const uint8_t* stop = std::min(p + n, end);
  for (; p < stop; p += 64) __builtin_prefetch(p, 0, 0);
}

// Shared loop of the plain and indexed products: token_of(i) is the activation row of output i.
// With several tokens and a multi-row kernel, each weight row is decoded once per group of up
// to kMaxMultiDot tokens (gathered into one contiguous buffer when indexed).
template <typename TokenOf>
void matmul_rows_impl(const WeightMatrix& w, const QuantizedRows& a, TokenOf token_of,
                      int64_t n_out, bool contiguous, float* out, int64_t out_stride,
                      int64_t row_begin, int64_t row_end, const MatmulSettings& settings) {
  const quant::TypeKernels& k = quant::traits(w.type).kernels;
  const int64_t a_bytes = a.row_bytes();
  const bool packed = w.tiles && k.packed.gemm && settings.tile_gemm &&
                      n_out >= settings.packed_min_tokens && row_begin % w.tile_rows == 0;
  if (w.compact || packed || (k.gemm && settings.tile_gemm && n_out >= settings.tile_min_tokens)) {
    // Called per block of rows: the pointer list is reused, not allocated each time.
    static thread_local std::vector<const uint8_t*> act;
    act.resize(static_cast<size_t>(n_out));
    for (int64_t i = 0; i < n_out; ++i) act[static_cast<size_t>(i)] = a.row(token_of(i));
    if (w.compact) {  // the only form these rows have now; blocks start a tile (matmul_row_block)
      STRATA_CHECK(row_begin % k.compact.rows == 0, "rows from {} of compact tiles of {}",
                   row_begin, k.compact.rows);
      k.compact.gemm(w.cols, w.row(row_begin), row_end - row_begin, act.data(), n_out,
                     out + row_begin, out_stride);
    } else if (packed) {
      k.packed.gemm(w.cols, w.tiles + row_begin / w.tile_rows * w.tile_bytes, row_end - row_begin,
                    act.data(), n_out, out + row_begin, out_stride);
    } else {
      k.gemm(w.cols, w.row(row_begin), w.row_bytes, row_end - row_begin, act.data(), n_out,
             out + row_begin, out_stride);
    }
    return;
  }
  if (k.vec_dot_multi && n_out > 1) {
    // Tokens per pass over the rows: as many as keep their activation rows within L1 while every
    // weight row of the block meets them (8 rows of 2048 f32 values, a router's, would not).
    const int64_t tokens_per_pass =
        std::clamp<int64_t>(kMultiDotActivationBytes / a_bytes, 1, quant::kMaxMultiDot);
    static thread_local std::vector<uint8_t> gathered;  // reused: called per block of rows
    float results[quant::kMaxMultiDot];
    for (int64_t i0 = 0; i0 < n_out; i0 += tokens_per_pass) {
      const int count = static_cast<int>(std::min<int64_t>(tokens_per_pass, n_out - i0));
      const uint8_t* group = a.row(token_of(i0));
      if (!contiguous) {
        gathered.resize(static_cast<size_t>(count * a_bytes));
        for (int j = 0; j < count; ++j) {
          std::memcpy(gathered.data() + j * a_bytes, a.row(token_of(i0 + j)),
                      static_cast<size_t>(a_bytes));
        }
        group = gathered.data();
      }
      for (int64_t r = row_begin; r < row_end; ++r) {
        k.vec_dot_multi(w.cols, w.row(r), group, a_bytes, count, results);
        for (int j = 0; j < count; ++j) out[(i0 + j) * out_stride + r] = results[j];
      }
    }
    return;
  }
  const quant::VecDotFn dot = k.vec_dot;
  if (n_out == 1) {
    // GEMV (decode): memory-bound. With software prefetch, the lines a row ahead are requested
    // while this one is computed; without, the hardware prefetchers stream alone.
    const uint8_t* act = a.row(token_of(0));
    const bool prefetch = settings.gemv_prefetch;
    if (k.gemv && !prefetch) {
      k.gemv(w.cols, w.row(row_begin), w.row_bytes, row_end - row_begin, act, out + row_begin);
      return;
    }
    for (int64_t r = row_begin; r < row_end; ++r) {
      if (prefetch) prefetch_range(w.row(r) + kPrefetchBytes, w.row_bytes, w.data + w.bytes());
      out[r] = dot(w.cols, w.row(r), act);
    }
    return;
  }
  constexpr int64_t kTokenTile = 16;
  for (int64_t i0 = 0; i0 < n_out; i0 += kTokenTile) {
    const int64_t i1 = std::min(n_out, i0 + kTokenTile);
    for (int64_t r = row_begin; r < row_end; ++r) {
      const uint8_t* wr = w.row(r);
      for (int64_t i = i0; i < i1; ++i)
        out[i * out_stride + r] = dot(w.cols, wr, a.row(token_of(i)));
    }
  }
}

}  // namespace

void matmul_rows(const WeightMatrix& w, const QuantizedRows& a, float* out, int64_t out_stride,
                 int64_t row_begin, int64_t row_end, const MatmulSettings& settings) {
  matmul_rows_impl(
      w, a, [](int64_t i) { return i; }, a.rows(), true, out, out_stride, row_begin, row_end,
      settings);
}

void matmul_rows_indexed(const WeightMatrix& w, const QuantizedRows& a, const int32_t* ids,
                         int64_t n_ids, float* out, int64_t out_stride, int64_t row_begin,
                         int64_t row_end, const MatmulSettings& settings) {
  matmul_rows_impl(
      w, a, [ids](int64_t i) { return static_cast<int64_t>(ids[i]); }, n_ids, false, out,
      out_stride, row_begin, row_end, settings);
}

int64_t tile_min_tokens(int64_t cpu_weight_bytes) {
  return cpu_weight_bytes >= kStreamedWeightBytes ? kTileMinTokensStreamed : kTileMinTokensResident;
}

int64_t matmul_row_block(const WeightMatrix& w, int64_t n_tokens, int n_threads,
                         int64_t n_matrices) {
  // Aim for ~4 blocks per thread over all the matrices of a step of a few tokens (there a block
  // is mostly scheduling cost: the trained model's decode 1.3x faster, Qwen3-30B-A3B's 3-7%), of
  // each matrix for batches (prefill kept its blocks: 2% faster so); at least 4 rows, and for big
  // batches keep blocks small enough that a block of rows stays in L2 across the token tiles.
  const int64_t shared = n_tokens <= kSharedBlockMaxTokens ? std::max<int64_t>(1, n_matrices) : 1;
  const int64_t target = std::max<int64_t>(1, w.rows * shared / (4 * std::max(1, n_threads)));
  int64_t block = std::clamp<int64_t>(target, 4, 256);
  if (n_tokens > 1)
    block = std::min<int64_t>(
        block, std::max<int64_t>(4, (256 << 10) / std::max<int64_t>(1, w.row_bytes)));
  // Packed tiles are used by blocks that start a tile.
  if (w.tiles) block = (block + w.tile_rows - 1) / w.tile_rows * w.tile_rows;
  // Compact tiles (of 4 or 8 rows) must be whole: multiples of 8 rows, within the L2 bound.
  if (w.compact) {
    block = n_tokens > 1 && block % kCompactTileRows != 0
                ? std::max(kCompactTileRows, block / kCompactTileRows * kCompactTileRows)
                : (block + kCompactTileRows - 1) / kCompactTileRows * kCompactTileRows;
  }
  return block;
}

void matmul(const WeightMatrix& w, const QuantizedRows& a, float* out, int64_t out_stride,
            ThreadPool& pool, const MatmulSettings& settings) {
  const MatmulPart part{&w, &a, out, out_stride};
  matmul_together({&part, 1}, pool, settings);
}

void matmul_together(std::span<const MatmulPart> parts, ThreadPool& pool,
                     const MatmulSettings& settings) {
  // Per part: its row block and the first task of its blocks.
  std::array<int64_t, 8> blocks{}, first{};
  STRATA_CHECK(parts.size() <= blocks.size(), "{} products in one run, at most {}", parts.size(),
               blocks.size());
  int64_t tasks = 0, macs = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const WeightMatrix& w = *parts[i].w;
    const QuantizedRows& a = *parts[i].a;
    STRATA_CHECK(a.type() == quant::traits(w.type).activation_type,
                 "activations are {} but {} weights need {}", ggml_type_name(a.type()),
                 ggml_type_name(w.type), ggml_type_name(quant::traits(w.type).activation_type));
    STRATA_CHECK(a.cols() == w.cols, "activation rows have {} values, weight rows {}", a.cols(),
                 w.cols);
    blocks[i] = matmul_row_block(w, a.rows(), pool.size(), static_cast<int64_t>(parts.size()));
    first[i] = tasks;
    tasks += (w.rows + blocks[i] - 1) / blocks[i];
    macs += w.rows * w.cols * a.rows();
  }
  if (macs <= kInlineMatmulMacs) {  // cheaper here than a round trip through the pool
    for (const MatmulPart& p : parts)
      matmul_rows(*p.w, *p.a, p.out, p.out_stride, 0, p.w->rows, settings);
    return;
  }
  pool.run(tasks, [&](int64_t task, int) {
    size_t i = parts.size() - 1;
    while (first[i] > task) --i;
    const MatmulPart& p = parts[i];
    const int64_t r0 = (task - first[i]) * blocks[i];
    matmul_rows(*p.w, *p.a, p.out, p.out_stride, r0, std::min(p.w->rows, r0 + blocks[i]), settings);
  });
}

}  // namespace strata::ops
