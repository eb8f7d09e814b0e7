// The prompt-batch products (matmul_tiled.comp, moe_group.comp) against the exact products of
// the CPU's own dequantized weights, for every weight type: odd row and token counts so every
// tile edge is crossed, and MoE pairs grouped by expert on the device with experts that need
// several tiles, one tile, or none.

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backend/vulkan/gpu_ops.h"
#include "gpu_test_device.h"
#include "gpu_test_weights.h"
#include "quant/quant.h"
#include "support/test_support.h"

namespace strata::vk {
namespace {

using strata::test::nmse;
using strata::test::random_floats;
using test::download;
using test::run;
using test::test_device;
using test::upload;

using test::kWeightTypes;
using test::make_matrix;
using test::TestMatrix;

// Row `row` of w . x, in double.
float exact_dot(const TestMatrix& w, int64_t row, const float* x, int64_t cols) {
  double s = 0;
  for (int64_t c = 0; c < cols; ++c) s += static_cast<double>(w.dequantized[row * cols + c]) * x[c];
  return static_cast<float>(s);
}

float silu_mul(float g, float u) {
  return g / (1.0f + std::exp(-g)) * u;
}

std::string type_name(const testing::TestParamInfo<GgmlType>& info) {
  return std::string(ggml_type_name(info.param));
}

class GpuTiled : public testing::TestWithParam<GgmlType> {};

// Dense prompt products: 9 (just past the one-row-per-workgroup kernel's 8), 64 and 139 tokens
// over 70 rows (a full and a partial row tile). Float sums of 512 products: NMSE < 1e-10
// (measured ~1e-14; a wrong row, token or group gives ~1).
TEST_P(GpuTiled, DenseProductsMatchTheDequantizedWeights) {
  const GgmlType type = GetParam();
  Device& dev = test_device();
  const int64_t rows = 70, cols = 512;
  const TestMatrix gate = make_matrix(type, rows, cols, 51), up = make_matrix(type, rows, cols, 52);
  Buffer gb = upload(dev, gate.bytes), ub = upload(dev, up.bytes);
  const GpuMatrix g{type, gb.address(), rows, cols, gate.row_bytes};
  const GpuMatrix u{type, ub.address(), rows, cols, up.row_bytes};
  for (const int64_t n_tok : {9, 64, 139}) {
    const auto x = random_floats(static_cast<size_t>(n_tok * cols), 53);
    const int64_t y_stride = rows + 3;  // strided output rows
    Buffer xb = upload(dev, x);
    Buffer plain =
        dev.allocate(static_cast<uint64_t>(n_tok * y_stride * 4), MemoryKind::device, "y");
    Buffer fused =
        dev.allocate(static_cast<uint64_t>(n_tok * y_stride * 4), MemoryKind::device, "y");
    run(dev, [&](CommandList& cmd) {
      GpuOps ops{dev, cmd};
      ops.matmul(g, xb.address(), cols, plain.address(), y_stride, n_tok);
      ops.matmul_swiglu(g, u, xb.address(), cols, fused.address(), y_stride, n_tok);
    });
    const auto got_plain = download<float>(dev, plain, static_cast<size_t>(n_tok * y_stride));
    const auto got_fused = download<float>(dev, fused, static_cast<size_t>(n_tok * y_stride));
    std::vector<float> want_plain, want_fused, have_plain, have_fused;
    for (int64_t t = 0; t < n_tok; ++t) {
      for (int64_t r = 0; r < rows; ++r) {
        const float yg = exact_dot(gate, r, &x[t * cols], cols);
        const float yu = exact_dot(up, r, &x[t * cols], cols);
        want_plain.push_back(yg);
        want_fused.push_back(silu_mul(yg, yu));
        have_plain.push_back(got_plain[t * y_stride + r]);
        have_fused.push_back(got_fused[t * y_stride + r]);
      }
    }
    EXPECT_LT(nmse(have_plain.data(), want_plain.data(), want_plain.size()), 1e-10)
        << ggml_type_name(type) << " tokens " << n_tok;
    EXPECT_LT(nmse(have_fused.data(), want_fused.data(), want_fused.size()), 1e-9)
        << ggml_type_name(type) << " tokens " << n_tok;
  }
}

// MoE prompt: 75 tokens x 3 experts each over 6 experts, routed so that expert 1 gets 75 pairs
// (two tiles), expert 5 none and the others a few; grouped on the device, then one tiled product
// per tile, plain and fused, as matmul_experts computes pair by pair.
TEST_P(GpuTiled, ExpertTilesGroupedOnTheDeviceMatchPairByPair) {
  const GgmlType type = GetParam();
  Device& dev = test_device();
  const int64_t n_expert = 6, rows = 40, cols = 256, n_tok = 75, k = 3, pairs = n_tok * k;
  const TestMatrix gate = make_matrix(type, n_expert * rows, cols, 61);
  const TestMatrix up = make_matrix(type, n_expert * rows, cols, 62);
  std::mt19937 rng(63);
  std::vector<int32_t> ids;
  for (int64_t t = 0; t < n_tok; ++t) {
    ids.push_back(1);  // every token: expert 1
    const int32_t a = static_cast<int32_t>(rng() % 2 == 0 ? 0 : 2 + rng() % 3);
    int32_t b = static_cast<int32_t>(rng() % 5);
    if (b == 1 || b == a) b = a == 0 ? 2 : 0;
    ids.push_back(a);
    ids.push_back(b);
  }
  const auto x = random_floats(static_cast<size_t>(n_tok * cols), 64);
  const int64_t capacity = moe_tiles_capacity(pairs, n_expert);
  Buffer gb = upload(dev, gate.bytes), ub = upload(dev, up.bytes), xb = upload(dev, x),
         idb = upload(dev, ids);
  Buffer order = dev.allocate(static_cast<uint64_t>(pairs * 4), MemoryKind::device, "order");
  Buffer tiles =
      dev.allocate(static_cast<uint64_t>((1 + 3 * capacity) * 4), MemoryKind::device, "tiles");
  Buffer plain = dev.allocate(static_cast<uint64_t>(pairs * rows * 4), MemoryKind::device, "y");
  Buffer fused = dev.allocate(static_cast<uint64_t>(pairs * rows * 4), MemoryKind::device, "y");
  const GpuMatrix g{type, gb.address(), rows, cols, gate.row_bytes};
  const GpuMatrix u{type, ub.address(), rows, cols, up.row_bytes};
  run(dev, [&](CommandList& cmd) {
    GpuOps ops{dev, cmd};
    ops.moe_group(idb.address(), pairs, n_expert, order.address(), tiles.address());
    ops.matmul_expert_tiles(g, nullptr, tiles.address(), order.address(), capacity, xb.address(),
                            cols, k, plain.address(), rows);
    ops.matmul_expert_tiles(g, &u, tiles.address(), order.address(), capacity, xb.address(), cols,
                            k, fused.address(), rows);
  });
  // The grouping itself: every pair once, expert by expert, tiles of at most 64 covering it.
  const auto got_order = download<uint32_t>(dev, order, static_cast<size_t>(pairs));
  const auto got_tiles = download<uint32_t>(dev, tiles, static_cast<size_t>(1 + 3 * capacity));
  std::vector<int> seen(static_cast<size_t>(pairs), 0);
  for (uint32_t p : got_order) ++seen[p];
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), pairs);
  ASSERT_LE(got_tiles[0], static_cast<uint32_t>(capacity));
  int64_t covered = 0;
  std::vector<int64_t> tiles_of(static_cast<size_t>(n_expert), 0);
  for (uint32_t i = 0; i < got_tiles[0]; ++i) {
    const uint32_t e = got_tiles[1 + 3 * i], start = got_tiles[2 + 3 * i], n = got_tiles[3 + 3 * i];
    EXPECT_EQ(start, covered);
    EXPECT_GE(n, 1u);
    EXPECT_LE(n, 64u);
    for (uint32_t j = 0; j < n; ++j) EXPECT_EQ(ids[got_order[start + j]], static_cast<int32_t>(e));
    covered += n;
    ++tiles_of[e];
  }
  EXPECT_EQ(covered, pairs);
  EXPECT_EQ(tiles_of[1], 2);  // 75 pairs
  EXPECT_EQ(tiles_of[5], 0);  // no pair

  const auto got_plain = download<float>(dev, plain, static_cast<size_t>(pairs * rows));
  const auto got_fused = download<float>(dev, fused, static_cast<size_t>(pairs * rows));
  std::vector<float> want_plain, want_fused;
  for (int64_t p = 0; p < pairs; ++p) {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t row = ids[static_cast<size_t>(p)] * rows + r;
      const float yg = exact_dot(gate, row, &x[p / k * cols], cols);
      const float yu = exact_dot(up, row, &x[p / k * cols], cols);
      want_plain.push_back(yg);
      want_fused.push_back(silu_mul(yg, yu));
    }
  }
  EXPECT_LT(nmse(got_plain.data(), want_plain.data(), want_plain.size()), 1e-10)
      << ggml_type_name(type);
  EXPECT_LT(nmse(got_fused.data(), want_fused.data(), want_fused.size()), 1e-9)
      << ggml_type_name(type);
}

void expect_prompt_and_decode_kernels_agree(GgmlType type, int64_t cols) {
  Device& dev = test_device();
  const int64_t rows = 37, n_tok = 70, k = 2, n_expert = 3;
  const TestMatrix gate = make_matrix(type, n_expert * rows, cols, 71);
  const TestMatrix up = make_matrix(type, n_expert * rows, cols, 72);
  const auto x = random_floats(static_cast<size_t>(n_tok * cols), 73);
  std::vector<int32_t> ids;
  for (int64_t p = 0; p < n_tok * k; ++p) ids.push_back(static_cast<int32_t>((p * 7 + p / 5) % 3));
  Buffer gb = upload(dev, gate.bytes), ub = upload(dev, up.bytes), xb = upload(dev, x),
         idb = upload(dev, ids);
  const GpuMatrix g{type, gb.address(), rows, cols, gate.row_bytes};
  const GpuMatrix u{type, ub.address(), rows, cols, up.row_bytes};
  const int64_t pairs = n_tok * k, capacity = moe_tiles_capacity(pairs, n_expert);
  const auto f32 = [&](int64_t count) {
    return dev.allocate(static_cast<uint64_t>(count) * 4, MemoryKind::device, "test output");
  };
  Buffer dense_big = f32(n_tok * rows), dense_small = f32(n_tok * rows);
  Buffer fused_big = f32(n_tok * rows), fused_small = f32(n_tok * rows);
  Buffer experts_pairs = f32(pairs * rows), experts_tiles = f32(pairs * rows);
  Buffer order = f32(pairs), tiles = f32(1 + 3 * capacity);
  run(dev, [&](CommandList& cmd) {
    GpuOps ops{dev, cmd};
    ops.matmul(g, xb.address(), cols, dense_big.address(), rows, n_tok);
    ops.matmul_swiglu(g, u, xb.address(), cols, fused_big.address(), rows, n_tok);
    for (int64_t t = 0; t < n_tok; t += 5) {  // the same tokens, 5 at a time
      const uint64_t xt = xb.address() + static_cast<uint64_t>(t * cols) * 4;
      const uint64_t yt = static_cast<uint64_t>(t * rows) * 4;
      ops.matmul(g, xt, cols, dense_small.address() + yt, rows, 5);
      ops.matmul_swiglu(g, u, xt, cols, fused_small.address() + yt, rows, 5);
    }
    ops.matmul_experts(g, &u, idb.address(), xb.address(), cols, k, experts_pairs.address(), rows,
                       pairs);
    ops.moe_group(idb.address(), pairs, n_expert, order.address(), tiles.address());
    ops.matmul_expert_tiles(g, &u, tiles.address(), order.address(), capacity, xb.address(), cols,
                            k, experts_tiles.address(), rows);
  });
  const auto bits = [&](const Buffer& b, int64_t count) {
    return download<uint32_t>(dev, b, static_cast<size_t>(count));
  };
  EXPECT_EQ(bits(dense_big, n_tok * rows), bits(dense_small, n_tok * rows)) << "dense";
  EXPECT_EQ(bits(fused_big, n_tok * rows), bits(fused_small, n_tok * rows)) << "fused SwiGLU";
  EXPECT_EQ(bits(experts_tiles, pairs * rows), bits(experts_pairs, pairs * rows)) << "experts";
}

// The tiled kernels sum every output in the one-row kernel's order: a token's products are the
// same bits whether its batch runs the decode kernel (up to 8 tokens) or the tiled one, dense,
// fused SwiGLU and expert forms alike. This is what makes batched serving equal single
// sequences and prefill equal decode on the GPU, as on the CPU.
// Rows of 8 and 24 groups share the decode kernel's workgroups (8 and 2 rows each, the last
// one short): the same bits too.
TEST_P(GpuTiled, PromptAndDecodeKernelsAgreeBitForBit) {
  for (const int64_t cols : {int64_t{2560}, int64_t{768}, int64_t{256}}) {  // 80 groups: 2 rounds
    SCOPED_TRACE(cols);
    expect_prompt_and_decode_kernels_agree(GetParam(), cols);
  }
}

// A layer keeping 3 of its 6 experts on the device (a hot set): the stack holds experts 2, 0, 4
// in slots 0, 1, 2 and a device-side map sends each expert id to its slot (-1: not here). Pairs
// of resident experts get their products, the others exact zeros, pair by pair (decode) and
// grouped by slot (prompts) alike, bit for bit.
TEST_P(GpuTiled, ResidentExpertSubsetThroughADeviceSlotMap) {
  const GgmlType type = GetParam();
  Device& dev = test_device();
  const int64_t n_expert = 6, resident = 3, rows = 24, cols = 256, n_tok = 40, k = 2;
  const int64_t pairs = n_tok * k;
  const std::vector<int32_t> slot_of = {1, -1, 0, -1, 2, -1};
  const TestMatrix stack = make_matrix(type, resident * rows, cols, 81);  // slots 0, 1, 2
  std::vector<int32_t> ids;
  for (int64_t p = 0; p < pairs; ++p) ids.push_back(static_cast<int32_t>((p * 5 + p / 7) % 6));
  const auto x = random_floats(static_cast<size_t>(n_tok * cols), 82);
  const int64_t capacity = moe_tiles_capacity(pairs, resident + 1);
  Buffer wb = upload(dev, stack.bytes), xb = upload(dev, x), idb = upload(dev, ids),
         sb = upload(dev, slot_of);
  const auto f32 = [&](int64_t count) {
    Buffer b = dev.allocate(static_cast<uint64_t>(count) * 4, MemoryKind::device, "test output");
    run(dev, [&](CommandList& cmd) { cmd.fill(b, 0, b.size(), 0x7fc00000u); });  // NaN: unwritten
    return b;
  };
  Buffer by_pair = f32(pairs * rows), by_tile = f32(pairs * rows), order = f32(pairs),
         tiles = f32(1 + 3 * capacity);
  const GpuMatrix w{type, wb.address(), rows, cols, stack.row_bytes};
  run(dev, [&](CommandList& cmd) {
    GpuOps ops{dev, cmd};
    ops.matmul_experts(w, nullptr, idb.address(), xb.address(), cols, k, by_pair.address(), rows,
                       pairs, sb.address());
    ops.moe_group(idb.address(), pairs, n_expert, order.address(), tiles.address(), sb.address(),
                  resident);
    ops.matmul_expert_tiles(w, nullptr, tiles.address(), order.address(), capacity, xb.address(),
                            cols, k, by_tile.address(), rows);
  });
  const auto got = download<float>(dev, by_pair, static_cast<size_t>(pairs * rows));
  EXPECT_EQ(download<uint32_t>(dev, by_tile, got.size()),
            download<uint32_t>(dev, by_pair, got.size()));
  std::vector<float> want;
  for (int64_t p = 0; p < pairs; ++p) {
    const int32_t slot = slot_of[static_cast<size_t>(ids[static_cast<size_t>(p)])];
    for (int64_t r = 0; r < rows; ++r) {
      if (slot < 0) {
        ASSERT_EQ(got[static_cast<size_t>(p * rows + r)], 0.0f) << "pair " << p;
        want.push_back(0.0f);
      } else {
        want.push_back(exact_dot(stack, slot * rows + r, &x[p / k * cols], cols));
      }
    }
  }
  EXPECT_LT(nmse(got.data(), want.data(), want.size()), 1e-10) << ggml_type_name(type);
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, GpuTiled, testing::ValuesIn(kWeightTypes), type_name);

}  // namespace
}  // namespace strata::vk
