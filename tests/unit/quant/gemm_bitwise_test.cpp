// Decode (vec_dot), two-token batches (vec_dot_multi) and prompt processing (the tile GEMM,
// TypeKernels::gemm) dot the same weight row with the same activation row, and must give
// bit-identical floats: otherwise a prompt evaluated in one batch gets other logits than the same
// tokens one at a time (and MoE routing can flip). Checked for the formats with an AVX-512 tile
// GEMM: random data, block counts that leave partial groups, 13 rows (a short last tile), every
// column-group split of vec_dot_multi and of the GEMM, and some all-zero weight blocks. The GEMM
// on tiles packed ahead (TypeKernels::packed, and the compact tiles of TypeKernels::compact) gives
// the same bits too.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "quant/quant.h"
#include "quant_test_helpers.h"
#include "support/test_support.h"

namespace strata::quant {
namespace {

uint32_t bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

void check(GgmlType type, const TypeKernels& k, int64_t blocks, uint32_t seed) {
  constexpr int64_t kRows = 13;
  constexpr int64_t kCols = 20;
  const TypeTraits& t = traits(type);
  const int64_t n = blocks * t.block_elems;
  auto w = test::random_floats(static_cast<size_t>(n * kRows), seed);
  // Zero blocks (scale 0) in a few rows: the paths must agree on them too.
  for (int64_t r = 1; r < kRows; r += 4) {
    const int64_t b = (r * 7) % blocks;
    std::memset(w.data() + r * n + b * t.block_elems, 0,
                static_cast<size_t>(t.block_elems) * sizeof(float));
  }
  const std::vector<uint8_t> wq = test_helpers::quantize_ref(type, w);
  const int64_t w_stride = row_bytes(type, n);
  const int64_t a_stride = row_bytes(t.activation_type, n);
  std::vector<uint8_t> aq(static_cast<size_t>(a_stride * kCols));
  for (int64_t c = 0; c < kCols; ++c) {
    const auto col = test_helpers::quantize_ref(
        t.activation_type, test::random_floats(static_cast<size_t>(n),
                                               seed * 31 + 5 + static_cast<uint32_t>(c), 2.0f));
    std::memcpy(aq.data() + c * a_stride, col.data(), col.size());
  }
  const auto row = [&](int64_t r) { return wq.data() + r * w_stride; };
  const auto act = [&](int64_t c) { return aq.data() + c * a_stride; };

  // Reference: vec_dot of every (row, column).
  std::vector<float> single(static_cast<size_t>(kRows * kCols));
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t c = 0; c < kCols; ++c)
      single[static_cast<size_t>(r * kCols + c)] = k.vec_dot(n, row(r), act(c));

  for (int64_t r = 0; r < kRows; ++r) {
    for (int n_act = 1; n_act <= kMaxMultiDot; ++n_act) {
      float out[kMaxMultiDot];
      k.vec_dot_multi(n, row(r), act(1), a_stride, n_act, out);
      for (int j = 0; j < n_act; ++j) {
        ASSERT_EQ(bits(out[j]), bits(single[static_cast<size_t>(r * kCols + 1 + j)]))
            << "vec_dot_multi blocks=" << blocks << " row " << r << " n_act=" << n_act << " column "
            << j << ": " << out[j] << " vs vec_dot "
            << single[static_cast<size_t>(r * kCols + 1 + j)];
      }
    }
  }

  std::vector<const uint8_t*> ptrs;
  for (int64_t c = 0; c < kCols; ++c) ptrs.push_back(act(c));
  for (int64_t n_cols : {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 16, 17, 20}) {
    std::vector<float> out(static_cast<size_t>(n_cols * kRows));
    k.gemm(n, wq.data(), w_stride, kRows, ptrs.data(), n_cols, out.data(), kRows);
    for (int64_t c = 0; c < n_cols; ++c) {
      for (int64_t r = 0; r < kRows; ++r) {
        const float got = out[static_cast<size_t>(c * kRows + r)];
        const float expected = single[static_cast<size_t>(r * kCols + c)];
        ASSERT_EQ(bits(got), bits(expected))
            << "gemm blocks=" << blocks << " n_cols=" << n_cols << " row " << r << " column " << c
            << ": " << got << " vs vec_dot " << expected;
      }
    }
  }

  // The same tiles packed ahead (aligned byte tiles, and where the format has them the compact
  // ones): all rows, and the rows from the second tile on.
  const auto check_packed = [&](const PackedTileKernels& p, const char* what) {
    ASSERT_TRUE(p.pack && p.gemm && p.bytes && p.rows > 0 && p.rows < kRows) << what;
    const int64_t tile_bytes = p.bytes(n);
    const int64_t n_tiles = (kRows + p.rows - 1) / p.rows;
    const std::unique_ptr<uint8_t, decltype(&std::free)> tiles(
        static_cast<uint8_t*>(
            std::aligned_alloc(64, static_cast<size_t>(n_tiles * tile_bytes + 64 - 1) / 64 * 64)),
        &std::free);
    p.pack(n, wq.data(), w_stride, kRows, tiles.get());
    for (int64_t first : {int64_t{0}, p.rows}) {
      for (int64_t n_cols : {1, 2, 3, 5, 8, 20}) {
        std::vector<float> out(static_cast<size_t>(n_cols * kRows));
        p.gemm(n, tiles.get() + first / p.rows * tile_bytes, kRows - first, ptrs.data(), n_cols,
               out.data() + first, kRows);
        for (int64_t c = 0; c < n_cols; ++c) {
          for (int64_t r = first; r < kRows; ++r) {
            const float got = out[static_cast<size_t>(c * kRows + r)];
            const float expected = single[static_cast<size_t>(r * kCols + c)];
            ASSERT_EQ(bits(got), bits(expected))
                << what << " gemm blocks=" << blocks << " rows from " << first
                << " n_cols=" << n_cols << " row " << r << " column " << c << ": " << got
                << " vs vec_dot " << expected;
          }
        }
      }
    }
  };
  ASSERT_EQ(k.packed.bytes(n) % 64, 0);
  check_packed(k.packed, "packed");
  if (testing::Test::HasFatalFailure()) return;
  if (k.compact.pack) {
    // Exactly the bytes of the rows: they are rewritten in place (ops/compact_tiles.h).
    EXPECT_EQ(k.compact.bytes(n), k.compact.rows * w_stride);
    check_packed(k.compact, "compact");
  }
}

class GemmBitwise : public testing::TestWithParam<GgmlType> {};

TEST_P(GemmBitwise, VecDotMultiAndTileIdentical) {
  const GgmlType type = GetParam();
  bool has_avx512 = false;
  for (Isa isa : available_isas()) has_avx512 = has_avx512 || isa == Isa::avx512;
  if (!has_avx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  const TypeKernels k = kernels_exact(type, Isa::avx512);
  ASSERT_NE(k.vec_dot, nullptr);
  ASSERT_NE(k.vec_dot_multi, nullptr);
  ASSERT_NE(k.gemm, nullptr);
  if (type != GgmlType::Q5_K) {  // every tile format but Q5_K has compact tiles
    ASSERT_NE(k.compact.gemm, nullptr);
  }
  uint32_t seed = 11;
  const std::vector<int64_t> block_counts =
      traits(type).block_elems == 256 ? std::vector<int64_t>{1, 2, 3, 8, 11}
                                      : std::vector<int64_t>{1, 2, 3, 4, 5, 7, 8, 13, 64, 67};
  for (int64_t blocks : block_counts) {
    check(type, k, blocks, seed++);
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(TileFormats, GemmBitwise,
                         testing::Values(GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q5_K,
                                         GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::IQ4_NL,
                                         GgmlType::IQ4_XS, GgmlType::MXFP4),
                         [](const testing::TestParamInfo<GgmlType>& info) {
                           return std::string(ggml_type_name(info.param));
                         });

}  // namespace
}  // namespace strata::quant
