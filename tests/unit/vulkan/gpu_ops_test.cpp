// Every GPU kernel against its CPU counterpart, on the test device (lavapipe in CI). The CPU
// kernels are themselves checked against the oracle files; thresholds say why they are what
// they are.

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "backend/vulkan/gpu_ops.h"
#include "gpu_test_device.h"
#include "gpu_test_weights.h"
#include "ops/activations.h"
#include "ops/attention.h"
#include "ops/matmul.h"
#include "ops/moe_routing.h"
#include "ops/rms_norm.h"
#include "ops/rope.h"
#include "quant/quant.h"
#include "support/test_support.h"
#include "unit/ops/kv_test_cache.h"
#include "util/thread_pool.h"

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

GpuMatrix on_device(const Buffer& b, GgmlType type, const TestMatrix& m) {
  return GpuMatrix{type, b.address(), m.rows, m.cols, m.row_bytes};
}

// y[t][r] = dequantized row (first_row + r) . x[t] for n_rows rows (all by default), summed in
// double: the exact product of the values the CPU's dequantizer decodes.
std::vector<float> reference_product(const TestMatrix& m, const std::vector<float>& x,
                                     int64_t n_tok, int64_t first_row = 0, int64_t n_rows = -1) {
  if (n_rows < 0) n_rows = m.rows - first_row;
  std::vector<float> y(static_cast<size_t>(n_tok * n_rows));
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t r = 0; r < n_rows; ++r) {
      double s = 0;
      for (int64_t c = 0; c < m.cols; ++c)
        s += static_cast<double>(m.dequantized[(first_row + r) * m.cols + c]) * x[t * m.cols + c];
      y[t * n_rows + r] = static_cast<float>(s);
    }
  }
  return y;
}

std::string type_name(const testing::TestParamInfo<GgmlType>& info) {
  return std::string(ggml_type_name(info.param));
}

class GpuMatmul : public testing::TestWithParam<GgmlType> {};

// The block decoding of each type: the GPU's products equal the products of the CPU's own
// dequantized values up to float summation order (groups of 32, then a tree): NMSE < 1e-10
// (float rounding over 512 terms is ~1e-14; a wrong nibble or scale gives > 1e-4).
TEST_P(GpuMatmul, MatchesTheCpuDequantizedProduct) {
  const GgmlType type = GetParam();
  Device& dev = test_device();
  for (const int64_t cols : {int64_t{512}, int64_t{1280}}) {
    const int64_t rows = 67;
    const TestMatrix m = make_matrix(type, rows, cols, 11);
    for (const int64_t n_tok : {int64_t{1}, int64_t{3}, int64_t{8}, int64_t{9}, int64_t{20}}) {
      const auto x = random_floats(static_cast<size_t>(n_tok * cols), 5);
      Buffer w = upload(dev, m.bytes), xb = upload(dev, x);
      Buffer y = dev.allocate(static_cast<uint64_t>(n_tok * rows * 4), MemoryKind::device, "y");
      run(dev, [&](CommandList& cmd) {
        GpuOps{dev, cmd}.matmul(on_device(w, type, m), xb.address(), cols, y.address(), rows,
                                n_tok);
      });
      const auto got = download<float>(dev, y, static_cast<size_t>(n_tok * rows));
      const auto want = reference_product(m, x, n_tok);
      EXPECT_LT(nmse(got.data(), want.data(), want.size()), 1e-10)
          << ggml_type_name(type) << " cols " << cols << " tokens " << n_tok;
    }
  }
}

// Against the CPU's production path (activations quantized to the partner type, as the model
// runs). The GPU first rounds the activations exactly as the CPU quantizes them
// (round_activations), so both compute the same integer-exact products and differ only in float
// summation order: NMSE < 1e-9 (measured ~1e-14). Without the rounding the gap would be the
// activation quantization's (~1e-5..1e-4 for 8-bit partners), so this also checks the rounding
// kernels for every partner format (F16, BF16, Q8_0, Q8_1, Q8_K). Q4_1 / Q5_1 (Q8_1 partner):
// the CPU adds min x s with the block sum s stored as f16 of the unrounded scale times the
// codes' sum, which the GPU's rounded floats do not carry: 1e-6 (measured 1.6e-7).
TEST_P(GpuMatmul, AgreesWithTheCpuMatmul) {
  const GgmlType type = GetParam();
  Device& dev = test_device();
  const int64_t rows = 45, cols = 768, n_tok = 5;
  const TestMatrix m = make_matrix(type, rows, cols, 21);
  const auto x = random_floats(static_cast<size_t>(n_tok * cols), 22);
  ops::QuantizedRows xq;
  xq.quantize(x.data(), n_tok, cols, cols, quant::traits(type).activation_type);
  std::vector<float> want(static_cast<size_t>(n_tok * rows));
  ThreadPool pool(1);
  ops::matmul(ops::WeightMatrix{type, m.bytes.data(), cols, rows, m.row_bytes}, xq, want.data(),
              rows, pool, {});
  Buffer w = upload(dev, m.bytes), xb = upload(dev, x);
  Buffer rounded = dev.allocate(x.size() * 4, MemoryKind::device, "rounded x");
  Buffer y = dev.allocate(want.size() * 4, MemoryKind::device, "y");
  bool was_rounded = false;
  run(dev, [&](CommandList& cmd) {
    GpuOps ops{dev, cmd};
    was_rounded =
        ops.round_activations(type, xb.address(), cols, rounded.address(), cols, n_tok, cols);
    ops.matmul(on_device(w, type, m), was_rounded ? rounded.address() : xb.address(), cols,
               y.address(), rows, n_tok);
  });
  EXPECT_EQ(was_rounded, quant::traits(type).activation_type != GgmlType::F32);
  const auto got = download<float>(dev, y, want.size());
  const bool q8_1 = quant::traits(type).activation_type == GgmlType::Q8_1;
  EXPECT_LT(nmse(got.data(), want.data(), want.size()), q8_1 ? 1e-6 : 1e-9) << ggml_type_name(type);
}

// Expert form, with and without fused SwiGLU: pair p uses expert ids[p] and activation p / k.
TEST_P(GpuMatmul, ExpertsSelectedOnTheDevice) {
  const GgmlType type = GetParam();
  Device& dev = test_device();
  const int64_t n_expert = 5, rows = 33, cols = 512, n_tok = 3, k = 2;
  const TestMatrix gate = make_matrix(type, n_expert * rows, cols, 31);
  const TestMatrix up = make_matrix(type, n_expert * rows, cols, 32);
  const std::vector<int32_t> ids = {4, 0, 2, 2, 1, 3};
  const auto x = random_floats(static_cast<size_t>(n_tok * cols), 33);
  Buffer gb = upload(dev, gate.bytes), ub = upload(dev, up.bytes), xb = upload(dev, x),
         idb = upload(dev, ids);
  const int64_t pairs = n_tok * k;
  Buffer plain = dev.allocate(static_cast<uint64_t>(pairs * rows * 4), MemoryKind::device, "y");
  Buffer fused = dev.allocate(static_cast<uint64_t>(pairs * rows * 4), MemoryKind::device, "y");
  const GpuMatrix g{type, gb.address(), rows, cols, gate.row_bytes};
  const GpuMatrix u{type, ub.address(), rows, cols, up.row_bytes};
  run(dev, [&](CommandList& cmd) {
    GpuOps ops{dev, cmd};
    ops.matmul_experts(g, nullptr, idb.address(), xb.address(), cols, k, plain.address(), rows,
                       pairs);
    ops.matmul_experts(g, &u, idb.address(), xb.address(), cols, k, fused.address(), rows, pairs);
  });
  const auto got_plain = download<float>(dev, plain, static_cast<size_t>(pairs * rows));
  const auto got_fused = download<float>(dev, fused, static_cast<size_t>(pairs * rows));
  std::vector<float> want_plain, want_fused;
  for (int64_t p = 0; p < pairs; ++p) {
    const std::vector<float> xt(x.begin() + p / k * cols, x.begin() + (p / k + 1) * cols);
    const auto yg = reference_product(gate, xt, 1, ids[p] * rows, rows);
    const auto yu = reference_product(up, xt, 1, ids[p] * rows, rows);
    for (int64_t r = 0; r < rows; ++r) {
      want_plain.push_back(yg[r]);
      want_fused.push_back(yg[r] / (1.0f + std::exp(-yg[r])) * yu[r]);
    }
  }
  EXPECT_LT(nmse(got_plain.data(), want_plain.data(), want_plain.size()), 1e-10);
  EXPECT_LT(nmse(got_fused.data(), want_fused.data(), want_fused.size()), 1e-9);
}

// Embedding rows: exactly the CPU's dequantized values.
TEST_P(GpuMatmul, GetRowsDequantizesExactly) {
  const GgmlType type = GetParam();
  Device& dev = test_device();
  const TestMatrix m = make_matrix(type, 10, 512, 41);
  const std::vector<int32_t> ids = {7, 0, 9, 7};
  Buffer w = upload(dev, m.bytes), idb = upload(dev, ids);
  Buffer out = dev.allocate(4 * 512 * 4, MemoryKind::device, "rows");
  run(dev, [&](CommandList& cmd) {
    GpuOps{dev, cmd}.get_rows(on_device(w, type, m), idb.address(), 4, out.address());
  });
  const auto got = download<float>(dev, out, 4 * 512);
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int64_t c = 0; c < 512; ++c) {
      ASSERT_EQ(got[i * 512 + c], m.dequantized[ids[i] * 512 + c])
          << ggml_type_name(type) << " row " << ids[i] << " col " << c;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, GpuMatmul, testing::ValuesIn(kWeightTypes), type_name);

TEST(GpuOps, RmsNormMatchesCpu) {
  Device& dev = test_device();
  const int64_t rows = 7, cols = 200;
  const auto x = random_floats(static_cast<size_t>(rows * cols), 51, 3.0f);
  const auto weight = random_floats(static_cast<size_t>(cols), 52);
  std::vector<float> want(x.size()), want_plain(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    ops::rms_norm(&x[r * cols], weight.data(), &want[r * cols], cols, 1e-6f);
    ops::rms_norm(&x[r * cols], nullptr, &want_plain[r * cols], cols, 1e-6f);
  }
  Buffer xb = upload(dev, x), wb = upload(dev, weight);
  Buffer out = dev.allocate(x.size() * 4, MemoryKind::device, "out");
  Buffer out_plain = dev.allocate(x.size() * 4, MemoryKind::device, "out");
  run(dev, [&](CommandList& cmd) {
    GpuOps ops{dev, cmd};
    ops.rms_norm(xb.address(), cols, wb.address(), out.address(), cols, rows, cols, 1e-6f);
    ops.rms_norm(xb.address(), cols, 0, out_plain.address(), cols, rows, cols, 1e-6f);
  });
  // Float sums in another order than the CPU's double: ~1e-14.
  EXPECT_LT(nmse(download<float>(dev, out, x.size()).data(), want.data(), x.size()), 1e-12);
  EXPECT_LT(nmse(download<float>(dev, out_plain, x.size()).data(), want_plain.data(), x.size()),
            1e-12);
}

TEST(GpuOps, RopeMatchesCpuInBothStylesAndPartialDims) {
  Device& dev = test_device();
  const int64_t n_tok = 5, heads = 3, hd = 64;
  const std::vector<int32_t> pos = {0, 1, 17, 300, 4095};
  for (const auto style : {ops::RopeStyle::norm, ops::RopeStyle::neox}) {
    for (const int64_t n_rot : {hd, int64_t{16}}) {
      // Plain, and with YaRN (gpt-oss's factor 32 over 4096): blended angles, scaled cos/sin.
      for (const float yarn : {0.0f, 32.0f}) {
        const ops::Rope rope(style, hd, n_rot, 1e6f, ops::YarnScaling{yarn, 4096, 32.0f, 1.0f});
        auto x = random_floats(static_cast<size_t>(n_tok * heads * hd), 61);
        // The CPU's table (as the decoders upload it): angle factors, then the cos/sin scale.
        std::vector<float> inv_freq = rope.inv_freq();
        inv_freq.push_back(rope.magnitude());
        Buffer xb = upload(dev, x), pb = upload(dev, pos), fb = upload(dev, inv_freq);
        run(dev, [&](CommandList& cmd) {
          GpuOps{dev, cmd}.rope(xb.address(), heads * hd, pb.address(), fb.address(), n_tok, heads,
                                hd, n_rot, style == ops::RopeStyle::neox);
        });
        for (int64_t t = 0; t < n_tok; ++t) rope.apply_heads(&x[t * heads * hd], heads, pos[t]);
        const auto got = download<float>(dev, xb, x.size());
        // cos/sin of angles up to 4095 rad: the GPU's and libm's agree to ~1e-7 relative.
        EXPECT_LT(nmse(got.data(), x.data(), x.size()), 1e-10)
            << "n_rot " << n_rot << " yarn " << yarn;
      }
    }
  }
}

class GpuAttention : public testing::TestWithParam<GgmlType> {};

// How far the GPU's attention may be from the CPU's (NMSE): float softmax in another order; over a
// Q8_0 cache also the CPU's values weighed in int16 (ops/attention_q8_values.h: each weight moves
// by up to 2^-16 of its chunk's largest), which the GPU computes in f32.
double attention_nmse_bound(GgmlType type) {
  return type == GgmlType::Q8_0 ? 1e-9 : 1e-10;
}

// KV store: the GPU writes the same cache bytes as the CPU's kv_store (F16 bit for bit; Q8_0
// scales bit for bit and quants within one step where x/d sits on a rounding tie).
TEST_P(GpuAttention, KvStoreWritesTheCpuLayout) {
  const GgmlType type = GetParam();
  Device& dev = test_device();
  const int64_t heads = 2, hd = 64, n = 6;
  auto cpu = ops::test_kv::make_cache(type, heads, hd, 16, 0, 1);
  const auto k = random_floats(static_cast<size_t>(n * heads * hd), 71);
  const auto v = random_floats(static_cast<size_t>(n * heads * hd), 72);
  const std::vector<int32_t> slots = {3, 0, 15, 4, 9, 1};
  for (int64_t t = 0; t < n; ++t)
    ops::kv_store(cpu.view, slots[t], &k[t * heads * hd], &v[t * heads * hd]);
  std::vector<uint8_t> blank(cpu.k.size(), 0xff);
  Buffer kc = upload(dev, blank), vc = upload(dev, blank), kb = upload(dev, k), vb = upload(dev, v),
         sb = upload(dev, slots);
  run(dev, [&](CommandList& cmd) {
    GpuOps{dev, cmd}.kv_store(type, kb.address(), vb.address(), kc.address(), vc.address(),
                              sb.address(), n, heads, hd);
  });
  const auto got_k = download<uint8_t>(dev, kc, cpu.k.size());
  const auto got_v = download<uint8_t>(dev, vc, cpu.v.size());
  if (type == GgmlType::F16) {
    EXPECT_EQ(got_k, cpu.k);
    EXPECT_EQ(got_v, cpu.v);
  } else {
    int differing = 0;
    for (size_t i = 0; i < got_k.size(); ++i) {
      const int a = static_cast<int8_t>(got_k[i]), b = static_cast<int8_t>(cpu.k[i]);
      if (a != b) ++differing;
      ASSERT_LE(std::abs(a - b), 1) << "byte " << i;
    }
    EXPECT_LE(differing, 2);
  }
}

// Attention over contiguous and paged caches, GQA, 1..300 positions: the GPU against the CPU's
// attend_group on the same cache bytes, within attention_nmse_bound.
TEST_P(GpuAttention, MatchesCpuOverContiguousAndPagedCaches) {
  const GgmlType type = GetParam();
  Device& dev = test_device();
  const int64_t kv_heads = 2, group = 3, heads = kv_heads * group, hd = 128;
  for (const int64_t page_size : {int64_t{0}, int64_t{16}}) {
    const int64_t capacity = 320;
    auto cache = ops::test_kv::make_cache(type, kv_heads, hd, capacity, page_size, 5);
    ops::test_kv::store_random(cache.view, 300, 81);
    const std::vector<int32_t> lengths = {1, 2, 64, 65, 300};
    const int64_t n_tok = static_cast<int64_t>(lengths.size());
    const auto q = random_floats(static_cast<size_t>(n_tok * heads * hd), 82);
    std::vector<int32_t> tokens;
    for (int32_t len : lengths) tokens.insert(tokens.end(), {len, 0});
    std::vector<int32_t> pages = cache.pages.empty() ? std::vector<int32_t>{0} : cache.pages;
    Buffer kc = upload(dev, cache.k), vc = upload(dev, cache.v), qb = upload(dev, q),
           tb = upload(dev, tokens), pb = upload(dev, pages);
    Buffer out = dev.allocate(q.size() * 4, MemoryKind::device, "out");
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    run(dev, [&](CommandList& cmd) {
      GpuOps{dev, cmd}.attention(type, qb.address(), heads * hd, out.address(), heads * hd,
                                 kc.address(), vc.address(), tb.address(), pb.address(), page_size,
                                 n_tok, heads, kv_heads, hd, scale);
    });
    const auto got = download<float>(dev, out, q.size());
    std::vector<float> want(q.size());
    for (int64_t t = 0; t < n_tok; ++t) {
      for (int64_t kvh = 0; kvh < kv_heads; ++kvh) {
        const size_t off = static_cast<size_t>(t * heads * hd + kvh * group * hd);
        ops::attend_group(cache.view, kvh, &q[off], group, lengths[t], scale, &want[off]);
      }
    }
    EXPECT_LT(nmse(got.data(), want.data(), want.size()), attention_nmse_bound(type))
        << "page size " << page_size;
  }
}

// Long caches, 1 to 4096 positions (block edges at 512 crossed), through one workgroup per
// (token, head) and through flash-decoding's split blocks and merge: the same bits both ways,
// and the CPU's attend_group's values (within attention_nmse_bound).
TEST_P(GpuAttention, SplitBlocksEqualOneWorkgroupOverLongCaches) {
  const GgmlType type = GetParam();
  Device& dev = test_device();
  const int64_t kv_heads = 1, group = 2, heads = kv_heads * group, hd = 64, capacity = 4096;
  auto cache = ops::test_kv::make_cache(type, kv_heads, hd, capacity, 64, 7);
  ops::test_kv::store_random(cache.view, capacity, 91);
  const std::vector<int32_t> lengths = {1, 511, 512, 513, 1500, 4096};
  const int64_t n_tok = static_cast<int64_t>(lengths.size());
  const auto q = random_floats(static_cast<size_t>(n_tok * heads * hd), 92);
  std::vector<int32_t> tokens;
  for (int32_t len : lengths) tokens.insert(tokens.end(), {len, 0});
  const int64_t splits = attention_blocks(4096);
  ASSERT_EQ(splits, 8);
  Buffer kc = upload(dev, cache.k), vc = upload(dev, cache.v), qb = upload(dev, q),
         tb = upload(dev, tokens), pb = upload(dev, cache.pages);
  Buffer whole = dev.allocate(q.size() * 4, MemoryKind::device, "out");
  Buffer split = dev.allocate(q.size() * 4, MemoryKind::device, "out");
  Buffer partials = dev.allocate(static_cast<uint64_t>(n_tok * heads * splits * (hd + 2) * 4),
                                 MemoryKind::device, "partials");
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  run(dev, [&](CommandList& cmd) {
    GpuOps ops{dev, cmd};
    ops.attention(type, qb.address(), heads * hd, whole.address(), heads * hd, kc.address(),
                  vc.address(), tb.address(), pb.address(), 64, n_tok, heads, kv_heads, hd, scale);
    ops.attention(type, qb.address(), heads * hd, split.address(), heads * hd, kc.address(),
                  vc.address(), tb.address(), pb.address(), 64, n_tok, heads, kv_heads, hd, scale,
                  partials.address(), splits);
  });
  EXPECT_EQ(download<uint32_t>(dev, whole, q.size()), download<uint32_t>(dev, split, q.size()));
  const auto got = download<float>(dev, split, q.size());
  std::vector<float> want(q.size());
  for (int64_t t = 0; t < n_tok; ++t) {
    const size_t off = static_cast<size_t>(t * heads * hd);
    ops::attend_group(cache.view, 0, &q[off], group, lengths[static_cast<size_t>(t)], scale,
                      &want[off]);
  }
  EXPECT_LT(nmse(got.data(), want.data(), want.size()), attention_nmse_bound(type));
}

// gpt-oss's attention: sliding windows (16: inside one block; 600: across block edges, so split
// mode skips whole blocks) and one sink logit per query head, through one workgroup and through
// split blocks (the same bits), against the CPU's attend_block with the same options.
TEST_P(GpuAttention, SlidingWindowsAndSinksMatchTheCpu) {
  const GgmlType type = GetParam();
  Device& dev = test_device();
  const int64_t kv_heads = 2, group = 2, heads = kv_heads * group, hd = 64, capacity = 2048;
  auto cache = ops::test_kv::make_cache(type, kv_heads, hd, capacity, 64, 9);
  ops::test_kv::store_random(cache.view, capacity, 93);
  const std::vector<int32_t> lengths = {1, 16, 17, 511, 600, 1100, 2048};
  const int64_t n_tok = static_cast<int64_t>(lengths.size());
  const auto q = random_floats(static_cast<size_t>(n_tok * heads * hd), 94);
  const std::vector<float> sinks = {2.0f, -1.5f, 0.4f, 5.0f};
  std::vector<int32_t> tokens;
  for (int32_t len : lengths) tokens.insert(tokens.end(), {len, 0});
  const int64_t splits = attention_blocks(capacity);
  Buffer kc = upload(dev, cache.k), vc = upload(dev, cache.v), qb = upload(dev, q),
         tb = upload(dev, tokens), pb = upload(dev, cache.pages), sb = upload(dev, sinks);
  Buffer partials = dev.allocate(static_cast<uint64_t>(n_tok * heads * splits * (hd + 2) * 4),
                                 MemoryKind::device, "partials");
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (const int64_t window : {int64_t{0}, int64_t{16}, int64_t{600}}) {
    for (const bool with_sinks : {false, true}) {
      SCOPED_TRACE(testing::Message() << "window " << window << " sinks " << with_sinks);
      AttentionExtras extras;
      extras.window = window;
      extras.sinks = with_sinks ? sb.address() : 0;
      Buffer whole = dev.allocate(q.size() * 4, MemoryKind::device, "out");
      Buffer split = dev.allocate(q.size() * 4, MemoryKind::device, "out");
      run(dev, [&](CommandList& cmd) {
        GpuOps ops{dev, cmd};
        ops.attention(type, qb.address(), heads * hd, whole.address(), heads * hd, kc.address(),
                      vc.address(), tb.address(), pb.address(), 64, n_tok, heads, kv_heads, hd,
                      scale, 0, 0, extras);
        ops.attention(type, qb.address(), heads * hd, split.address(), heads * hd, kc.address(),
                      vc.address(), tb.address(), pb.address(), 64, n_tok, heads, kv_heads, hd,
                      scale, partials.address(), splits, extras);
      });
      EXPECT_EQ(download<uint32_t>(dev, whole, q.size()), download<uint32_t>(dev, split, q.size()));
      const auto got = download<float>(dev, split, q.size());
      std::vector<float> want(q.size());
      for (int64_t t = 0; t < n_tok; ++t) {
        const int64_t n_pos = lengths[static_cast<size_t>(t)];
        const int64_t first = window > 0 ? std::max<int64_t>(0, n_pos - window) : 0;
        for (int64_t kvh = 0; kvh < kv_heads; ++kvh) {
          ops::AttendOptions options;
          options.first_position = &first;
          options.sinks = with_sinks ? &sinks[static_cast<size_t>(kvh * group)] : nullptr;
          const size_t off = static_cast<size_t>(t * heads * hd + kvh * group * hd);
          ops::attend_block(cache.view, kvh, &q[off], 0, group, 1, &n_pos, scale, &want[off], 0,
                            options);
        }
      }
      EXPECT_LT(nmse(got.data(), want.data(), want.size()), attention_nmse_bound(type));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(F16AndQ8_0, GpuAttention, testing::Values(GgmlType::F16, GgmlType::Q8_0),
                         type_name);

TEST(GpuOps, MoeRouteMatchesCpuTopK) {
  Device& dev = test_device();
  const int64_t n_tok = 9, n_expert = 128, k = 8;
  auto logits = random_floats(static_cast<size_t>(n_tok * n_expert), 91, 4.0f);
  logits[3] = logits[7];  // a tie: the lower id wins on both sides
  const auto bias = random_floats(static_cast<size_t>(n_expert), 92, 0.2f);
  Buffer bias_b = upload(dev, bias);
  // Softmax gating, and GLM-4.5's sigmoid gating with its selection bias and weight scale.
  for (const bool sigmoid : {false, true}) {
    for (const bool renorm : {true, false}) {
      Buffer lb = upload(dev, logits);
      Buffer ib = dev.allocate(n_tok * k * 4, MemoryKind::device, "ids");
      Buffer wb = dev.allocate(n_tok * k * 4, MemoryKind::device, "weights");
      MoeRouting routing;
      routing.renormalize = renorm;
      routing.sigmoid_gating = sigmoid;
      routing.selection_bias = sigmoid ? bias_b.address() : 0;
      routing.scale = sigmoid ? 2.5f : 1.0f;
      run(dev, [&](CommandList& cmd) {
        GpuOps{dev, cmd}.moe_route(lb.address(), ib.address(), wb.address(), n_tok, n_expert, k,
                                   routing);
      });
      const auto ids = download<int32_t>(dev, ib, n_tok * k);
      const auto weights = download<float>(dev, wb, n_tok * k);
      for (int64_t t = 0; t < n_tok; ++t) {
        std::vector<int32_t> want_ids(k);
        std::vector<float> want_w(k);
        if (sigmoid) {
          ops::route_top_k_sigmoid(&logits[t * n_expert], bias.data(), n_expert, k, renorm, 2.5f,
                                   want_ids.data(), want_w.data());
        } else {
          ops::route_top_k(&logits[t * n_expert], n_expert, k, renorm, want_ids.data(),
                           want_w.data());
        }
        for (int64_t j = 0; j < k; ++j) {
          EXPECT_EQ(ids[t * k + j], want_ids[j]) << "token " << t << " slot " << j;
          EXPECT_NEAR(weights[t * k + j], want_w[j], 1e-5f);
        }
      }
    }
  }
}

TEST(GpuOps, MoeCombineAndElementwise) {
  Device& dev = test_device();
  const int64_t n_tok = 3, n_embd = 70, k = 2;
  const auto down = random_floats(static_cast<size_t>(n_tok * k * n_embd), 101);
  const auto weights = random_floats(static_cast<size_t>(n_tok * k), 102);
  const auto shared = random_floats(static_cast<size_t>(n_tok * n_embd), 103);
  const auto shared_logit = random_floats(static_cast<size_t>(n_tok), 104);
  const auto a = random_floats(static_cast<size_t>(n_tok * n_embd), 105, 3.0f);
  // Wide enough that both clamps of the clamped SwiGLU (7) act.
  const auto wide_gate = random_floats(static_cast<size_t>(n_tok * n_embd), 106, 12.0f);
  const auto wide_up = random_floats(static_cast<size_t>(n_tok * n_embd), 107, 12.0f);
  Buffer db = upload(dev, down), wb = upload(dev, weights), sb = upload(dev, shared),
         lb = upload(dev, shared_logit), add_x = upload(dev, a), swi_x = upload(dev, a),
         sig_x = upload(dev, a), oai_x = upload(dev, wide_gate), oai_up = upload(dev, wide_up),
         bias_x = upload(dev, a);
  Buffer out = dev.allocate(n_tok * n_embd * 4, MemoryKind::device, "out");
  const int64_t n = n_tok * n_embd;
  run(dev, [&](CommandList& cmd) {
    GpuOps ops{dev, cmd};
    ops.moe_combine(db.address(), wb.address(), out.address(), sb.address(), lb.address(), n_tok,
                    n_embd, k);
    ops.add(add_x.address(), sb.address(), n);
    ops.swiglu(swi_x.address(), sb.address(), n);
    ops.sigmoid_mul(sig_x.address(), sb.address(), n);
    ops.swiglu_oai(oai_x.address(), oai_up.address(), n);
    ops.add_bias(bias_x.address(), sb.address(), n_tok, n_embd);  // row 0 of shared as the bias
  });
  std::vector<float> want(static_cast<size_t>(n), 0.0f), want_add(a), want_swi(n), want_sig(a);
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t j = 0; j < k; ++j)
      ops::axpy(weights[t * k + j], &down[(t * k + j) * n_embd], &want[t * n_embd], n_embd);
    ops::axpy(1.0f / (1.0f + std::exp(-shared_logit[t])), &shared[t * n_embd], &want[t * n_embd],
              n_embd);
  }
  ops::axpy(1.0f, shared.data(), want_add.data(), n);
  ops::swiglu(a.data(), shared.data(), want_swi.data(), n);
  for (int64_t i = 0; i < n; ++i) want_sig[i] = a[i] / (1.0f + std::exp(-shared[i]));
  std::vector<float> want_oai(static_cast<size_t>(n)), want_bias(a);
  ops::swiglu_oai(wide_gate.data(), wide_up.data(), want_oai.data(), n, 1.702f, 7.0f);
  for (int64_t i = 0; i < n; ++i) want_bias[i] += shared[i % n_embd];
  EXPECT_LT(nmse(download<float>(dev, out, n).data(), want.data(), n), 1e-12);
  EXPECT_LT(nmse(download<float>(dev, add_x, n).data(), want_add.data(), n), 1e-14);
  EXPECT_LT(nmse(download<float>(dev, swi_x, n).data(), want_swi.data(), n), 1e-12);
  EXPECT_LT(nmse(download<float>(dev, sig_x, n).data(), want_sig.data(), n), 1e-12);
  EXPECT_LT(nmse(download<float>(dev, oai_x, n).data(), want_oai.data(), n), 1e-12);
  EXPECT_LT(nmse(download<float>(dev, bias_x, n).data(), want_bias.data(), n), 1e-14);
}

}  // namespace
}  // namespace strata::vk
