// IQ4_NL and IQ4_XS: hand-built blocks decode to hand-computed values (the layout, independently
// of the quantizer), quantization quality on Gaussian data, vec_dot against the dot of the
// dequantized rows, and edge cases.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "quant/blocks.h"
#include "quant/quant.h"
#include "quant_test_helpers.h"
#include "support/test_support.h"

namespace strata::quant {
namespace {

using test_helpers::dequantize_all;
using test_helpers::expect_decodes;
using test_helpers::quantize_ref;

uint8_t pattern(int i, int salt) {
  return static_cast<uint8_t>((i * 53 + salt * 71 + 5) ^ (i >> 2));
}

// ---------------------------------------------------------------------------------------------
// Layout.

TEST(IQuantLayout, IQ4NL) {
  BlockIQ4_NL b[2]{};
  b[0].d = f32_to_f16(0.5f);
  b[1].d = f32_to_f16(-0.25f);
  for (int i = 0; i < 16; ++i) {
    b[0].qs[i] = pattern(i, 1);
    b[1].qs[i] = pattern(i, 2);
  }
  b[0].qs[0] = 0x1f;  // element 0 = entry 15 (113), element 16 = entry 1 (-104)
  std::vector<float> expected(64);
  for (int blk = 0; blk < 2; ++blk) {
    const float d = blk == 0 ? 0.5f : -0.25f;
    for (int e = 0; e < 16; ++e) {
      expected[32 * blk + e] = d * kIq4nlValues[b[blk].qs[e] & 15];
      expected[32 * blk + e + 16] = d * kIq4nlValues[b[blk].qs[e] >> 4];
    }
  }
  EXPECT_FLOAT_EQ(expected[0], 56.5f);
  EXPECT_FLOAT_EQ(expected[16], -52.0f);
  expect_decodes(GgmlType::IQ4_NL, b, expected);
}

TEST(IQuantLayout, IQ4XS) {
  BlockIQ4_XS b{};
  const float d = 0.125f;
  b.d = f32_to_f16(d);
  // Stored scales (scale + 32) of the 8 sub-blocks; packed by hand:
  // scales_l[k] = v[2k] & 15 | (v[2k+1] & 15) << 4, scales_h bits 2j..2j+1 = v[j] >> 4.
  const int v[8] = {0, 63, 31, 32, 15, 48, 7, 56};
  const uint8_t scales_l[4] = {0xf0, 0x0f, 0x0f, 0x87};
  std::memcpy(b.scales_l, scales_l, 4);
  b.scales_h = 0xcc9c;
  for (int i = 0; i < 128; ++i) b.qs[i] = pattern(i, 3);
  // Sub-block j: 16 bytes qs[16j..16j+15]; element e < 16 is the low nibble of byte e, element
  // e + 16 its high nibble.
  std::vector<float> expected(kQKK);
  for (int j = 0; j < 8; ++j) {
    for (int e = 0; e < 16; ++e) {
      const uint8_t byte = b.qs[16 * j + e];
      expected[32 * j + e] = d * static_cast<float>(v[j] - 32) * kIq4nlValues[byte & 15];
      expected[32 * j + e + 16] = d * static_cast<float>(v[j] - 32) * kIq4nlValues[byte >> 4];
    }
  }
  expect_decodes(GgmlType::IQ4_XS, &b, expected);
}

// ---------------------------------------------------------------------------------------------
// Quality on Gaussian data.

double roundtrip_nmse(GgmlType type, const std::vector<float>& x) {
  const auto q = quantize_ref(type, x);
  const auto y = dequantize_all(type, q.data(), static_cast<int64_t>(x.size()), Isa::scalar);
  return test::nmse(y.data(), x.data(), x.size());
}

TEST(IQuantQuality, GaussianRoundTrip) {
  // Measured on this data (64 x 256 elements): IQ4_NL 0.00539, IQ4_XS 0.00548 (Q4_K 0.00488);
  // the bounds leave ~5% headroom.
  const auto x = test::random_floats(64 * kQKK, 1234);
  const double nl = roundtrip_nmse(GgmlType::IQ4_NL, x);
  const double xs = roundtrip_nmse(GgmlType::IQ4_XS, x);
  const double q4k = roundtrip_nmse(GgmlType::Q4_K, x);
  std::printf("  IQ4_NL nmse %.4g  IQ4_XS nmse %.4g  (Q4_K %.4g)\n", nl, xs, q4k);
  EXPECT_LT(nl, 0.0057);
  EXPECT_LT(xs, 0.0058);
  // Both close to Q4_K (same bits per weight ballpark), and far better than Q3_K.
  EXPECT_LT(nl, 1.25 * q4k);
  EXPECT_LT(xs, 1.25 * q4k);
  EXPECT_LT(xs, 0.5 * roundtrip_nmse(GgmlType::Q3_K, x));
}

TEST(IQuantQuality, ScaleInvariant) {
  for (GgmlType type : {GgmlType::IQ4_NL, GgmlType::IQ4_XS}) {
    const double unit = roundtrip_nmse(type, test::random_floats(8 * kQKK, 7));
    for (float scale : {1e-3f, 1e3f}) {
      const double e = roundtrip_nmse(type, test::random_floats(8 * kQKK, 7, scale));
      EXPECT_LT(e, unit * 1.2) << ggml_type_name(type) << " scale " << scale;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// vec_dot equals the dot of the dequantized rows (double accumulated), at every level.

TEST(IQuantDot, MatchesDequantizedDot) {
  for (GgmlType type : {GgmlType::IQ4_NL, GgmlType::IQ4_XS}) {
    const GgmlType act_type = traits(type).activation_type;
    for (int64_t n : {256, 768, 2048}) {
      const auto w = test::random_floats(static_cast<size_t>(n), 300 + static_cast<uint32_t>(n));
      const auto a = test::random_floats(static_cast<size_t>(n), 400 + static_cast<uint32_t>(n));
      const auto wq = quantize_ref(type, w);
      const auto aq = quantize_ref(act_type, a);
      const auto wd = dequantize_all(type, wq.data(), n, Isa::scalar);
      const auto ad = dequantize_all(act_type, aq.data(), n, Isa::scalar);
      double expected = 0, magnitude = 0;
      for (int64_t i = 0; i < n; ++i) {
        expected += static_cast<double>(wd[i]) * ad[i];
        magnitude += std::fabs(static_cast<double>(wd[i]) * ad[i]);
      }
      for (Isa isa : available_isas()) {
        const VecDotFn dot = kernels_exact(type, isa).vec_dot;
        if (!dot) continue;
        EXPECT_NEAR(dot(n, wq.data(), aq.data()), expected, 2e-6 * magnitude)
            << ggml_type_name(type) << " " << isa_name(isa) << " n " << n;
      }
    }
  }
}

// Odd block counts at every level against the scalar reference, with activations from the local
// Q8_0 quantizer when the registry has none yet (the generic agreement test needs it).
TEST(IQuantDot, LevelsAgreeOnOddBlockCounts) {
  for (GgmlType type : {GgmlType::IQ4_NL, GgmlType::IQ4_XS}) {
    const GgmlType act_type = traits(type).activation_type;
    const int64_t block = traits(type).block_elems;
    for (int64_t blocks : {1, 3, 7, 33}) {
      const int64_t n = blocks * block;
      const auto w =
          test::random_floats(static_cast<size_t>(n), 11 + static_cast<uint32_t>(blocks));
      const auto a =
          test::random_floats(static_cast<size_t>(n), 12 + static_cast<uint32_t>(blocks));
      const auto wq = quantize_ref(type, w);
      const auto aq = quantize_ref(act_type, a);
      const float expected = kernels_exact(type, Isa::scalar).vec_dot(n, wq.data(), aq.data());
      double magnitude = 0;
      for (int64_t i = 0; i < n; ++i) magnitude += std::fabs(w[i] * a[i]);
      for (Isa isa : available_isas()) {
        const VecDotFn dot = kernels_exact(type, isa).vec_dot;
        if (!dot) continue;
        EXPECT_NEAR(dot(n, wq.data(), aq.data()), expected, 1e-5 * magnitude)
            << ggml_type_name(type) << " " << isa_name(isa) << " blocks " << blocks;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Edge cases.

TEST(IQuantEdge, AllZeroBlocks) {
  std::vector<float> x(3 * kQKK, 0.0f);
  for (int i = kQKK; i < 2 * kQKK; ++i) x[i] = std::cos(static_cast<float>(i));
  for (GgmlType type : {GgmlType::IQ4_NL, GgmlType::IQ4_XS}) {
    const auto q = quantize_ref(type, x);
    for (Isa isa : available_isas()) {
      if (!kernels_exact(type, isa).dequantize_row) continue;
      const auto y = dequantize_all(type, q.data(), 3 * kQKK, isa);
      for (int i = 0; i < 3 * kQKK; ++i) {
        ASSERT_TRUE(std::isfinite(y[i])) << ggml_type_name(type) << " " << i;
        if (i < kQKK || i >= 2 * kQKK) {
          ASSERT_EQ(y[i], 0.0f) << ggml_type_name(type) << " " << i;
        }
      }
    }
    const GgmlType act_type = traits(type).activation_type;
    const auto a = quantize_ref(act_type, test::random_floats(3 * kQKK, 3));
    const auto zero_a = quantize_ref(act_type, std::vector<float>(3 * kQKK, 0.0f));
    for (Isa isa : available_isas()) {
      const VecDotFn dot = kernels_exact(type, isa).vec_dot;
      if (!dot) continue;
      EXPECT_TRUE(std::isfinite(dot(3 * kQKK, q.data(), a.data()))) << ggml_type_name(type);
      EXPECT_EQ(dot(3 * kQKK, q.data(), zero_a.data()), 0.0f) << ggml_type_name(type);
    }
  }
}

TEST(IQuantEdge, ConstantBlocks) {
  for (GgmlType type : {GgmlType::IQ4_NL, GgmlType::IQ4_XS}) {
    for (float c : {0.75f, -0.75f}) {
      const std::vector<float> x(kQKK, c);
      const auto q = quantize_ref(type, x);
      const auto y = dequantize_all(type, q.data(), kQKK, Isa::scalar);
      for (int i = 0; i < kQKK; ++i) {
        ASSERT_NEAR(y[i], c, 0.01f) << ggml_type_name(type) << " c " << c << " i " << i;
      }
    }
  }
}

TEST(IQuantEdge, SingleHugeOutlier) {
  auto x = test::random_floats(2 * kQKK, 77);
  x[100] = 1000.0f;
  for (GgmlType type : {GgmlType::IQ4_NL, GgmlType::IQ4_XS}) {
    const auto q = quantize_ref(type, x);
    const auto y = dequantize_all(type, q.data(), 2 * kQKK, Isa::scalar);
    for (float v : y) ASSERT_TRUE(std::isfinite(v)) << ggml_type_name(type);
    EXPECT_NEAR(y[100], 1000.0f, 10.0f) << ggml_type_name(type);
    const double clean = test::nmse(y.data() + kQKK, x.data() + kQKK, kQKK);
    const double reference = roundtrip_nmse(type, std::vector<float>(x.begin() + kQKK, x.end()));
    EXPECT_DOUBLE_EQ(clean, reference) << ggml_type_name(type);
  }
}

TEST(IQuantEdge, OneBlock) {
  for (GgmlType type : {GgmlType::IQ4_NL, GgmlType::IQ4_XS}) {
    const int64_t n = traits(type).block_elems;
    const auto x = test::random_floats(static_cast<size_t>(n), 5);
    const auto q = quantize_ref(type, x);
    const auto y = dequantize_all(type, q.data(), n, Isa::scalar);
    EXPECT_LT(test::nmse(y.data(), x.data(), static_cast<size_t>(n)), 0.02) << ggml_type_name(type);
  }
}

}  // namespace
}  // namespace strata::quant
