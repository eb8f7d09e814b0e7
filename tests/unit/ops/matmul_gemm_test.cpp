// Prompt processing and decode see the same products: matmul over many tokens (the tile GEMM
// where the weight type has one) equals one single-token matmul (the GEMV path) per token, for the
// plain and the indexed (expert) forms, with row blocks that leave short tiles. The GEMV path gives
// the same bits with and without software prefetch, and the scalar reference's dot products.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "ops/matmul.h"
#include "ops/packed_tiles.h"
#include "quant/quant.h"
#include "support/test_support.h"
#include "util/error.h"

namespace strata::ops {
namespace {

struct Problem {
  std::vector<uint8_t> wq;
  WeightMatrix w;
  std::vector<float> x;
  QuantizedRows a;
};

Problem make_problem(GgmlType type, int64_t cols, int64_t rows, int64_t tokens) {
  const quant::TypeTraits& t = quant::traits(type);
  Problem p;
  const auto wf = test::random_floats(static_cast<size_t>(cols * rows), 11);
  p.wq.resize(static_cast<size_t>(quant::row_bytes(type, cols) * rows));
  t.kernels.quantize_row(wf.data(), p.wq.data(), cols * rows);
  p.w = WeightMatrix{type, p.wq.data(), cols, rows, quant::row_bytes(type, cols)};
  p.x = test::random_floats(static_cast<size_t>(cols * tokens), 12);
  p.a.quantize(p.x.data(), tokens, cols, cols, t.activation_type);
  return p;
}

// Row r of token `tok` through the single-token path, and the bound for float reordering.
float gemv(const Problem& p, int64_t tok, int64_t r, double* magnitude) {
  QuantizedRows one;
  one.quantize(p.x.data() + tok * p.w.cols, 1, p.w.cols, p.w.cols, p.a.type());
  std::vector<float> out(static_cast<size_t>(p.w.rows));
  matmul_rows(p.w, one, out.data(), p.w.rows, r, r + 1, {});
  const auto& t = quant::traits(p.w.type);
  std::vector<float> wd(static_cast<size_t>(p.w.cols)), ad(static_cast<size_t>(p.w.cols));
  t.kernels.dequantize_row(p.w.row(r), wd.data(), p.w.cols);
  quant::traits(p.a.type()).kernels.dequantize_row(one.row(0), ad.data(), p.w.cols);
  *magnitude = 0;
  for (size_t i = 0; i < wd.size(); ++i) *magnitude += std::fabs(double(wd[i]) * ad[i]);
  return out[static_cast<size_t>(r)];
}

const GgmlType kTypes[] = {GgmlType::Q4_K, GgmlType::Q5_K,   GgmlType::Q6_K,
                           GgmlType::Q8_0, GgmlType::IQ4_XS, GgmlType::F16};

TEST(MatmulGemm, ManyTokensEqualPerTokenGemv) {
  ThreadPool pool(2);
  for (GgmlType type : kTypes) {
    SCOPED_TRACE(std::string(ggml_type_name(type)));
    const int64_t cols = 768, rows = 45, tokens = 37;
    Problem p = make_problem(type, cols, rows, tokens);
    std::vector<float> out(static_cast<size_t>(tokens * rows));
    matmul(p.w, p.a, out.data(), rows, pool, {});
    for (int64_t tok = 0; tok < tokens; tok += 3) {
      for (int64_t r = 0; r < rows; ++r) {
        double magnitude;
        const float expected = gemv(p, tok, r, &magnitude);
        ASSERT_NEAR(out[static_cast<size_t>(tok * rows + r)], expected, 1e-5 * magnitude)
            << "token " << tok << " row " << r;
      }
    }
  }
}

TEST(MatmulGemm, IndexedTokensEqualPerTokenGemv) {
  for (GgmlType type : kTypes) {
    SCOPED_TRACE(std::string(ggml_type_name(type)));
    const int64_t cols = 512, rows = 21, tokens = 30;
    Problem p = make_problem(type, cols, rows, tokens);
    const std::vector<int32_t> ids = {29, 3, 3, 17, 0, 8, 22, 11, 5, 26, 14};
    const int64_t n_ids = static_cast<int64_t>(ids.size());
    std::vector<float> out(static_cast<size_t>(n_ids * rows), -1.0f);
    // Two row ranges, as two work items would split them.
    matmul_rows_indexed(p.w, p.a, ids.data(), n_ids, out.data(), rows, 0, 13, {});
    matmul_rows_indexed(p.w, p.a, ids.data(), n_ids, out.data(), rows, 13, rows, {});
    for (int64_t i = 0; i < n_ids; ++i) {
      for (int64_t r = 0; r < rows; ++r) {
        double magnitude;
        const float expected = gemv(p, ids[static_cast<size_t>(i)], r, &magnitude);
        ASSERT_NEAR(out[static_cast<size_t>(i * rows + r)], expected, 1e-5 * magnitude)
            << "entry " << i << " row " << r;
      }
    }
  }
}

TEST(MatmulGemm, GemvSameWithAndWithoutPrefetchAsTheScalarReference) {
  ThreadPool pool(2);
  MatmulSettings prefetch, no_prefetch;
  prefetch.gemv_prefetch = true;
  // Rows of a few KiB, so the prefetch distance (8 KiB) runs past the end of the matrix.
  for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q5_0, GgmlType::Q6_K, GgmlType::Q8_0,
                        GgmlType::MXFP4, GgmlType::F16}) {
    SCOPED_TRACE(std::string(ggml_type_name(type)));
    const int64_t cols = 2816, rows = 67;
    const Problem p = make_problem(type, cols, rows, 1);
    std::vector<float> with(static_cast<size_t>(rows)), without(static_cast<size_t>(rows));
    matmul(p.w, p.a, with.data(), rows, pool, prefetch);
    matmul(p.w, p.a, without.data(), rows, pool, no_prefetch);
    ASSERT_EQ(std::memcmp(with.data(), without.data(), with.size() * sizeof(float)), 0);
    const quant::VecDotFn reference = quant::kernels_exact(type, quant::Isa::scalar).vec_dot;
    for (int64_t r = 0; r < rows; ++r) {
      const float expected = reference(cols, p.w.row(r), p.a.row(0));
      ASSERT_NEAR(without[static_cast<size_t>(r)], expected, 1e-4 * (1 + std::fabs(expected)))
          << "row " << r;
    }
  }
}

// Where the tile GEMM starts (MatmulSettings::tile_min_tokens: 3 for cached weights, 8 for
// streamed ones) changes how a product of 3-7 tokens runs, not its bits.
TEST(MatmulGemm, TilesFromThreeOrEightTokensGiveTheSameBits) {
  ThreadPool pool(2);
  MatmulSettings from3, from8;
  from3.tile_min_tokens = kTileMinTokensResident;
  from8.tile_min_tokens = kTileMinTokensStreamed;
  for (GgmlType type : kTypes) {
    SCOPED_TRACE(std::string(ggml_type_name(type)));
    for (int64_t tokens = 2; tokens <= 9; ++tokens) {
      const int64_t cols = 512, rows = 29;
      const Problem p = make_problem(type, cols, rows, tokens);
      std::vector<float> a(static_cast<size_t>(tokens * rows)), b(a.size());
      matmul(p.w, p.a, a.data(), rows, pool, from3);
      matmul(p.w, p.a, b.data(), rows, pool, from8);
      ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << tokens;
    }
  }
}

// Weights packed into tiles ahead (PackedTiles) give the bits of the products without, from one
// token up, whole and in slices (the experts of a [cols, rows, n_expert] tensor): a slice keeps
// the tiles where it starts a tile, and runs without them where it does not.
TEST(MatmulGemm, PackedTilesGiveTheSameBits) {
  ThreadPool pool(2);
  MatmulSettings plain, tiled;
  tiled.pack_tiles = true;
  tiled.packed_min_tokens = 1;
  for (GgmlType type : kTypes) {
    SCOPED_TRACE(std::string(ggml_type_name(type)));
    const int64_t cols = 512, rows = 48;
    for (int64_t tokens : {1, 2, 3, 5, 9}) {
      Problem p = make_problem(type, cols, rows, tokens);
      std::vector<float> want(static_cast<size_t>(tokens * rows)), got(want.size());
      matmul(p.w, p.a, want.data(), rows, pool, plain);
      PackedTiles tiles;
      tiles.pack(p.w);
      const bool has_tiles = quant::traits(type).kernels.packed.pack != nullptr;
      ASSERT_EQ(p.w.tiles != nullptr, has_tiles);
      EXPECT_EQ(tiles.bytes() > 0, has_tiles);
      matmul(p.w, p.a, got.data(), rows, pool, tiled);
      ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0) << tokens;
      for (const auto& [first, count] : {std::pair<int64_t, int64_t>{16, 16}, {5, 24}}) {
        const WeightMatrix part = p.w.slice(first, count);
        EXPECT_EQ(part.tiles != nullptr, has_tiles && first % p.w.tile_rows == 0) << first;
        std::vector<float> a(static_cast<size_t>(tokens * count)), b(a.size());
        matmul(p.w.slice(first, count), p.a, a.data(), count, pool, tiled);
        for (int64_t t = 0; t < tokens; ++t)
          std::memcpy(b.data() + t * count, want.data() + t * rows + first,
                      static_cast<size_t>(count) * sizeof(float));
        ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
            << tokens << " tokens, rows from " << first;
      }
      tiles.unpack();
      EXPECT_EQ(p.w.tiles, nullptr);
      EXPECT_EQ(tiles.bytes(), 0);
    }
  }
  // Row blocks of a packed matrix start tiles.
  static const uint8_t some_tiles[64] = {};
  const WeightMatrix expert{GgmlType::Q8_0, nullptr, 256, 96, quant::row_bytes(GgmlType::Q8_0, 256),
                            some_tiles,     8,       64};
  for (int64_t tokens : {1, 3, 8, 64})
    EXPECT_EQ(matmul_row_block(expert, tokens, 2, 11) % 8, 0) << tokens;
}

TEST(MatmulGemm, TilesStartLaterForWeightsStreamedFromRam) {
  EXPECT_EQ(tile_min_tokens(8 << 20), kTileMinTokensResident);  // the trained model: 8 MiB
  EXPECT_EQ(tile_min_tokens(kStreamedWeightBytes - 1), kTileMinTokensResident);
  EXPECT_EQ(tile_min_tokens(kStreamedWeightBytes), kTileMinTokensStreamed);
  EXPECT_EQ(tile_min_tokens(int64_t{17} << 30), kTileMinTokensStreamed);
  EXPECT_LT(kTileMinTokensResident, kTileMinTokensStreamed);
}

// The experts of one MoE layer share a pool run: in a step of a few tokens, with many of them,
// each is cut into fewer row blocks (a block is a scheduling cost), and the items of all of them
// still balance the threads.
TEST(MatmulGemm, MatricesSharingARunAreCutIntoFewerBlocks) {
  const WeightMatrix expert{GgmlType::Q8_0, nullptr, 256, 96,
                            quant::row_bytes(GgmlType::Q8_0, 256)};
  const int threads = 2;
  const int64_t alone = matmul_row_block(expert, 1, threads);
  EXPECT_EQ(alone, 12);  // 96 rows / (4 per thread x 2 threads)
  int64_t previous = alone;
  for (int64_t experts : {2, 4, 8, 11, 16}) {
    const int64_t block = matmul_row_block(expert, 8, threads, experts);
    EXPECT_GE(block, previous) << experts;
    const int64_t items = experts * ((expert.rows + block - 1) / block);
    EXPECT_GE(items, std::min<int64_t>(experts, 4 * threads)) << experts;
    previous = block;
  }
  EXPECT_GE(matmul_row_block(expert, 8, threads, 11), expert.rows);  // one item per expert
  // A prompt batch keeps each matrix's own blocks.
  EXPECT_EQ(matmul_row_block(expert, 512, threads, 11), matmul_row_block(expert, 512, threads));
  // A big expert still stays within the L2 bound of a multi-token block.
  const WeightMatrix big{GgmlType::Q4_K, nullptr, 2048, 768,
                         quant::row_bytes(GgmlType::Q4_K, 2048)};
  EXPECT_LE(matmul_row_block(big, 8, threads, 64) * big.row_bytes, int64_t{256} << 10);
  // Rows in compact tiles: blocks of whole tiles (multiples of 8 rows), still within that bound.
  WeightMatrix compact = big;
  compact.compact = true;
  for (int64_t tokens : {1, 2, 8, 512}) {
    for (int64_t experts : {1, 8, 64}) {
      const int64_t block = matmul_row_block(compact, tokens, threads, experts);
      EXPECT_EQ(block % kCompactTileRows, 0) << tokens << " tokens, " << experts;
      if (tokens > 1) {
        EXPECT_LE(block * compact.row_bytes, int64_t{256} << 10);
      }
    }
  }
}

// Products of one set of rows by several matrices in one pool run (a layer's q, k and v) give each
// product's bits alone, whatever the token count (GEMV, repacked tiles, packed tiles) and whether
// a product is small enough to run on the calling thread (the Q8_0 and F16 ones alone at one
// token), and are refused past the parts one run holds.
TEST(MatmulGemm, ProductsTogetherGiveTheBitsOfEachAlone) {
  ThreadPool pool(3);
  const int64_t cols = 512;
  for (int64_t tokens : {1, 2, 5, 20}) {
    SCOPED_TRACE("tokens " + std::to_string(tokens));
    const std::pair<GgmlType, int64_t> shapes[] = {
        {GgmlType::Q4_K, 45}, {GgmlType::Q8_0, 30}, {GgmlType::F16, 17}, {GgmlType::Q6_K, 64}};
    std::vector<Problem> problems;
    for (const auto& [type, rows] : shapes)
      problems.push_back(make_problem(type, cols, rows, tokens));
    PackedTiles packed;
    packed.pack(problems[3].w);
    std::vector<std::vector<float>> together(problems.size()), alone(problems.size());
    std::vector<MatmulPart> parts;
    for (size_t i = 0; i < problems.size(); ++i) {
      const Problem& p = problems[i];
      together[i].assign(static_cast<size_t>(tokens * p.w.rows), -1.0f);
      alone[i].assign(together[i].size(), -2.0f);
      parts.push_back({&p.w, &p.a, together[i].data(), p.w.rows});
      matmul(p.w, p.a, alone[i].data(), p.w.rows, pool, {.pack_tiles = true});
    }
    matmul_together(parts, pool, {.pack_tiles = true});
    for (size_t i = 0; i < problems.size(); ++i) {
      EXPECT_EQ(
          0, std::memcmp(together[i].data(), alone[i].data(), together[i].size() * sizeof(float)))
          << ggml_type_name(problems[i].w.type);
    }
    const std::vector<MatmulPart> too_many(9, parts[0]);
    EXPECT_THROW(matmul_together(too_many, pool, {}), strata::Error);
  }
}

// Rows quantized a few at a time into a shaped QuantizedRows (each MoE expert's hidden rows, by the
// thread that finished the expert) hold the bytes the whole quantization gives; rows past the
// shape are refused.
TEST(MatmulGemm, RowsQuantizedInPiecesEqualTheWhole) {
  const int64_t rows = 7, cols = 96;
  const auto x = test::random_floats(static_cast<size_t>(rows * cols), 21);
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::F16, GgmlType::F32}) {
    SCOPED_TRACE(std::string(ggml_type_name(type)));
    QuantizedRows whole, pieces;
    whole.quantize(x.data(), rows, cols, cols, type);
    pieces.shape(rows, cols, type);
    for (const auto& [first, n] : {std::pair<int64_t, int64_t>{4, 3}, {0, 1}, {1, 3}})
      pieces.quantize_rows(x.data() + first * cols, first, n, cols);
    ASSERT_EQ(pieces.rows(), rows);
    EXPECT_EQ(
        0, std::memcmp(pieces.row(0), whole.row(0), static_cast<size_t>(rows * whole.row_bytes())));
    EXPECT_THROW(pieces.quantize_rows(x.data(), 5, 3, cols), strata::Error);
  }
}

}  // namespace
}  // namespace strata::ops
