// K-quants (Q2_K .. Q6_K) and their activation format Q8_K: hand-built super-blocks decode to
// hand-computed values (the layout, independently of the quantizer), quantization quality on
// Gaussian data, vec_dot against the dot of the dequantized rows, and edge cases.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "quant/blocks.h"
#include "quant/kquants_common.h"
#include "quant/quant.h"
#include "quant_test_helpers.h"
#include "support/test_support.h"

namespace strata::quant {
namespace {

using test_helpers::dequantize_all;
using test_helpers::expect_decodes;
using test_helpers::quantize_ref;

constexpr int kN = 256;

// Deterministic byte pattern for filling quant fields.
uint8_t pattern(int i, int salt) {
  return static_cast<uint8_t>((i * 37 + salt * 101 + 11) ^ (i >> 3));
}

// ---------------------------------------------------------------------------------------------
// Layout: every type decoded at every level from bytes written by hand.

TEST(KQuantLayout, Q2K) {
  BlockQ2_K b{};
  const float d = 0.5f, dmin = 0.25f;
  b.d = f32_to_f16(d);
  b.dmin = f32_to_f16(dmin);
  for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<uint8_t>((s ^ 5) | ((15 - s) << 4));
  for (int i = 0; i < 64; ++i) b.qs[i] = pattern(i, 1);
  b.qs[0] = 0x0b;  // spot-checked below
  // Two halves of 128 elements; in half h the 2-bit field at shift 2j of qs[32h + l] is element
  // 128h + 32j + l, which lies in sub-block (of 16) 8h + 2j + l / 16.
  std::vector<float> expected(kN);
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l) {
        const int q = (b.qs[32 * h + l] >> (2 * j)) & 3;
        const int sub = 8 * h + 2 * j + l / 16;
        expected[128 * h + 32 * j + l] = d * static_cast<float>(sub ^ 5) * static_cast<float>(q) -
                                         dmin * static_cast<float>(15 - sub);
      }
    }
  }
  // Spot checks written out: qs[0] = 0x0b = 0b00'00'10'11 -> elements 0, 32, 64, 96 hold 3, 2, 0,
  // 0.
  EXPECT_FLOAT_EQ(expected[0], 0.5f * 5 * 3 - 0.25f * 15);
  EXPECT_FLOAT_EQ(expected[32], 0.5f * 7 * 2 - 0.25f * 13);
  EXPECT_FLOAT_EQ(expected[64], 0.5f * 1 * 0 - 0.25f * 11);
  expect_decodes(GgmlType::Q2_K, &b, expected);
}

// 16 scales 0..63 (stored values, i.e. signed scale + 32) packed as documented for Q3_K.
void pack_q3k_scales_by_hand(const int* v, uint8_t* b) {
  std::memset(b, 0, 12);
  for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>((v[i] & 15) | ((v[i + 8] & 15) << 4));
  for (int k = 0; k < 4; ++k) {
    for (int g = 0; g < 4; ++g)
      b[8 + k] = static_cast<uint8_t>(b[8 + k] | ((v[4 * g + k] >> 4) << (2 * g)));
  }
}

TEST(KQuantLayout, Q3KScalePacking) {
  const int v[16] = {0, 1, 15, 16, 17, 31, 32, 33, 47, 48, 49, 63, 5, 40, 60, 20};
  uint8_t b[12];
  pack_q3k_scales_by_hand(v, b);
  // Literal bytes: b[0] = v0 | v8 << 4 = 0 | 15 << 4; b[8] = hi(v0) | hi(v4) << 2 | hi(v8) << 4 |
  // hi(v12) << 6 = 0 | 1 << 2 | 2 << 4 | 0 << 6.
  EXPECT_EQ(b[0], 0xf0);
  EXPECT_EQ(b[8], 0x24);
  EXPECT_EQ(b[11], (1 << 0) | (2 << 2) | (3 << 4) | (1 << 6));  // v3=16, v7=33, v11=63, v15=20
  int8_t unpacked[16];
  unpack_q3k_scales(b, unpacked);
  uint32_t words[4];
  unpack_q3k_scales_words(b, words);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(unpacked[i], v[i] - 32) << i;
    EXPECT_EQ(static_cast<int>((words[i / 4] >> (8 * (i % 4))) & 0xff), v[i]) << i;
  }
  int8_t signed_scales[16];
  for (int i = 0; i < 16; ++i) signed_scales[i] = static_cast<int8_t>(v[i] - 32);
  uint8_t repacked[12];
  pack_q3k_scales(signed_scales, repacked);
  EXPECT_EQ(std::memcmp(repacked, b, 12), 0);
}

TEST(KQuantLayout, Q3K) {
  BlockQ3_K b{};
  const float d = 0.125f;
  b.d = f32_to_f16(d);
  const int v[16] = {0, 1, 15, 16, 17, 31, 32, 33, 47, 48, 49, 63, 5, 40, 60, 20};
  pack_q3k_scales_by_hand(v, b.scales);
  for (int i = 0; i < 64; ++i) b.qs[i] = pattern(i, 2);
  for (int i = 0; i < 32; ++i) b.hmask[i] = pattern(i, 3);
  // Low 2 bits as in Q2_K; the high bit of element 128h + 32j + l is bit 4h + j of hmask[l];
  // q = low + 4 * high - 4, value = d * (v[sub] - 32) * q.
  std::vector<float> expected(kN);
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l) {
        const int low = (b.qs[32 * h + l] >> (2 * j)) & 3;
        const int high = (b.hmask[l] >> (4 * h + j)) & 1;
        const int i = 128 * h + 32 * j + l;
        expected[i] =
            d * static_cast<float>(v[i / 16] - 32) * static_cast<float>(low + 4 * high - 4);
      }
    }
  }
  expect_decodes(GgmlType::Q3_K, &b, expected);
}

// Q4_K / Q5_K scales and mins: sub-blocks 4..7 exercise the high bits stored in bytes 0..7.
constexpr uint8_t kK4Scales[8] = {1, 2, 3, 4, 33, 46, 59, 63};
constexpr uint8_t kK4Mins[8] = {5, 6, 7, 8, 17, 30, 45, 62};
// Packed by hand: b[j] = sc[j] | (sc[j+4] >> 4) << 6, b[j+4] = mn[j] | (mn[j+4] >> 4) << 6,
// b[j+8] = (sc[j+4] & 15) | (mn[j+4] & 15) << 4.
constexpr uint8_t kK4Packed[12] = {0x81, 0x82, 0xc3, 0xc4, 0x45, 0x46,
                                   0x87, 0xc8, 0x11, 0xee, 0xdb, 0xef};

TEST(KQuantLayout, K4ScalePacking) {
  uint8_t sc[8], mn[8];
  unpack_k4_scales(kK4Packed, sc, mn);
  uint32_t words[4];
  unpack_k4_scales_words(kK4Packed, words);
  for (int j = 0; j < 8; ++j) {
    EXPECT_EQ(sc[j], kK4Scales[j]) << j;
    EXPECT_EQ(mn[j], kK4Mins[j]) << j;
    EXPECT_EQ((words[j / 4] >> (8 * (j % 4))) & 0xff, kK4Scales[j]) << j;
    EXPECT_EQ((words[2 + j / 4] >> (8 * (j % 4))) & 0xff, kK4Mins[j]) << j;
  }
  uint8_t repacked[12];
  pack_k4_scales(kK4Scales, kK4Mins, repacked);
  EXPECT_EQ(std::memcmp(repacked, kK4Packed, 12), 0);
}

TEST(KQuantLayout, Q4K) {
  BlockQ4_K b{};
  const float d = 0.5f, dmin = 0.25f;
  b.d = f32_to_f16(d);
  b.dmin = f32_to_f16(dmin);
  std::memcpy(b.scales, kK4Packed, 12);
  for (int i = 0; i < 128; ++i) b.qs[i] = pattern(i, 4);
  b.qs[0] = 0x0b;  // spot-checked below
  // qs[32p .. 32p+31]: low nibbles are sub-block 2p, high nibbles sub-block 2p+1.
  std::vector<float> expected(kN);
  for (int p = 0; p < 4; ++p) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t byte = b.qs[32 * p + l];
      for (int half = 0; half < 2; ++half) {
        const int sub = 2 * p + half;
        const int q = half == 0 ? (byte & 15) : (byte >> 4);
        expected[32 * sub + l] = d * kK4Scales[sub] * static_cast<float>(q) - dmin * kK4Mins[sub];
      }
    }
  }
  // Spot check: element 32 is the high nibble of qs[0] = 0x0b -> 0, in sub-block 1.
  EXPECT_FLOAT_EQ(expected[32], -0.25f * 6);
  EXPECT_FLOAT_EQ(expected[0], 0.5f * 1 * 11 - 0.25f * 5);
  expect_decodes(GgmlType::Q4_K, &b, expected);
}

TEST(KQuantLayout, Q5K) {
  BlockQ5_K b{};
  const float d = 0.5f, dmin = 0.25f;
  b.d = f32_to_f16(d);
  b.dmin = f32_to_f16(dmin);
  std::memcpy(b.scales, kK4Packed, 12);
  for (int i = 0; i < 128; ++i) b.qs[i] = pattern(i, 5);
  for (int i = 0; i < 32; ++i) b.qh[i] = pattern(i, 6);
  // As Q4_K, plus bit `sub` of qh[l] adds 16 to element 32 * sub + l.
  std::vector<float> expected(kN);
  for (int p = 0; p < 4; ++p) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t byte = b.qs[32 * p + l];
      for (int half = 0; half < 2; ++half) {
        const int sub = 2 * p + half;
        const int q = (half == 0 ? (byte & 15) : (byte >> 4)) + 16 * ((b.qh[l] >> sub) & 1);
        expected[32 * sub + l] = d * kK4Scales[sub] * static_cast<float>(q) - dmin * kK4Mins[sub];
      }
    }
  }
  expect_decodes(GgmlType::Q5_K, &b, expected);
}

TEST(KQuantLayout, Q6K) {
  BlockQ6_K b{};
  const float d = 0.0625f;
  b.d = f32_to_f16(d);
  for (int i = 0; i < 128; ++i) b.ql[i] = pattern(i, 7);
  for (int i = 0; i < 64; ++i) b.qh[i] = pattern(i, 8);
  for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<int8_t>(s * 17 - 128);  // -128..127
  // Halves of 128: for l in 0..31, with L = ql + 64h and H = qh + 32h:
  //   element 128h + l      = (L[l] & 15)      | (H[l] & 3) << 4
  //   element 128h + 32 + l = (L[l + 32] & 15) | (H[l] >> 2 & 3) << 4
  //   element 128h + 64 + l = (L[l] >> 4)      | (H[l] >> 4 & 3) << 4
  //   element 128h + 96 + l = (L[l + 32] >> 4) | (H[l] >> 6 & 3) << 4
  // each minus 32, times d and the int8 scale of its sub-block of 16.
  std::vector<float> expected(kN);
  for (int h = 0; h < 2; ++h) {
    const uint8_t* L = b.ql + 64 * h;
    const uint8_t* H = b.qh + 32 * h;
    for (int l = 0; l < 32; ++l) {
      const int q[4] = {(L[l] & 15) | (H[l] & 3) << 4, (L[l + 32] & 15) | (H[l] >> 2 & 3) << 4,
                        (L[l] >> 4) | (H[l] >> 4 & 3) << 4,
                        (L[l + 32] >> 4) | (H[l] >> 6 & 3) << 4};
      for (int k = 0; k < 4; ++k) {
        const int i = 128 * h + 32 * k + l;
        expected[i] = d * static_cast<float>(b.scales[i / 16]) * static_cast<float>(q[k] - 32);
      }
    }
  }
  expect_decodes(GgmlType::Q6_K, &b, expected);
}

TEST(KQuantLayout, Q8K) {
  BlockQ8_K b{};
  b.d = 0.03125f;
  for (int i = 0; i < kN; ++i) b.qs[i] = static_cast<int8_t>(pattern(i, 9));
  std::vector<float> expected(kN);
  for (int i = 0; i < kN; ++i) expected[i] = 0.03125f * b.qs[i];
  expect_decodes(GgmlType::Q8_K, &b, expected);
}

// ---------------------------------------------------------------------------------------------
// Q8_K activation quantizer: the ecosystem's convention, at every level.

TEST(KQuantQ8K, FollowsConvention) {
  std::vector<float> x(2 * kN);
  for (int i = 0; i < 2 * kN; ++i) x[i] = static_cast<float>(i % kN - 100) / 10.0f;  // -10 .. 15.5
  x[kN + 7] = -20.0f;  // second block: the extreme is negative
  for (Isa isa : available_isas()) {
    const TypeKernels k = kernels_exact(GgmlType::Q8_K, isa);
    if (!k.quantize_row) continue;
    BlockQ8_K b[2];
    k.quantize_row(x.data(), b, 2 * kN);
    for (int blk = 0; blk < 2; ++blk) {
      const float vmax = blk == 0 ? 15.5f : -20.0f;
      const float iscale = -127.0f / vmax;
      EXPECT_FLOAT_EQ(b[blk].d, 1.0f / iscale) << isa_name(isa);
      for (int i = 0; i < kN; ++i) {
        const float v = iscale * x[blk * kN + i];
        const int expected = std::min(127, static_cast<int>(std::nearbyint(v)));
        ASSERT_EQ(b[blk].qs[i], expected) << isa_name(isa) << " block " << blk << " i " << i;
      }
      for (int j = 0; j < 16; ++j) {
        int sum = 0;
        for (int i = 0; i < 16; ++i) sum += b[blk].qs[16 * j + i];
        EXPECT_EQ(b[blk].bsums[j], sum) << isa_name(isa) << " j " << j;
      }
    }
    EXPECT_EQ(b[0].qs[kN - 1], -127);
    EXPECT_EQ(b[1].qs[7], -127);
    EXPECT_EQ(b[1].qs[kN - 1], 98);  // 15.5 * 127 / 20 = 98.4
  }
}

TEST(KQuantQ8K, AllZeroBlock) {
  std::vector<float> x(kN, 0.0f);
  for (Isa isa : available_isas()) {
    const TypeKernels k = kernels_exact(GgmlType::Q8_K, isa);
    if (!k.quantize_row) continue;
    BlockQ8_K b;
    std::memset(&b, 0x55, sizeof b);
    k.quantize_row(x.data(), &b, kN);
    EXPECT_EQ(b.d, 0.0f);
    for (int i = 0; i < kN; ++i) ASSERT_EQ(b.qs[i], 0);
    for (int j = 0; j < 16; ++j) ASSERT_EQ(b.bsums[j], 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Quality on Gaussian data.

const GgmlType kWeightTypes[] = {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                                 GgmlType::Q6_K};

double roundtrip_nmse(GgmlType type, const std::vector<float>& x) {
  const auto q = quantize_ref(type, x);
  const auto y = dequantize_all(type, q.data(), static_cast<int64_t>(x.size()), Isa::scalar);
  return test::nmse(y.data(), x.data(), x.size());
}

struct NmseBound {
  GgmlType type;
  double bound;
};

TEST(KQuantQuality, GaussianRoundTrip) {
  // Measured on this data (64 super-blocks): Q2_K 0.0674, Q3_K 0.0210, Q4_K 0.00488,
  // Q5_K 0.00118, Q6_K 0.000281, Q8_K 4.94e-5; the bounds leave ~5% headroom.
  const NmseBound bounds[] = {{GgmlType::Q2_K, 0.071},    {GgmlType::Q3_K, 0.022},
                              {GgmlType::Q4_K, 0.0051},   {GgmlType::Q5_K, 0.00124},
                              {GgmlType::Q6_K, 0.000296}, {GgmlType::Q8_K, 5.2e-5}};
  const auto x = test::random_floats(64 * kN, 1234);
  double previous = 1;
  for (const NmseBound& b : bounds) {
    const double e = roundtrip_nmse(b.type, x);
    std::printf("  %s nmse %.4g\n", std::string(ggml_type_name(b.type)).c_str(), e);
    EXPECT_LT(e, b.bound) << ggml_type_name(b.type);
    EXPECT_LT(e, previous) << ggml_type_name(b.type) << " should beat the coarser type before it";
    previous = e;
  }
}

TEST(KQuantQuality, ScaleInvariant) {
  // Tiny and large magnitudes quantize as well as unit scale (no f16 underflow of the scales at
  // 1e-3, no overflow at 1e3).
  for (GgmlType type : kWeightTypes) {
    const double unit = roundtrip_nmse(type, test::random_floats(8 * kN, 7));
    for (float scale : {1e-3f, 1e3f}) {
      const double e = roundtrip_nmse(type, test::random_floats(8 * kN, 7, scale));
      EXPECT_LT(e, unit * 1.2) << ggml_type_name(type) << " scale " << scale;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// vec_dot equals the dot of the dequantized rows (double accumulated), at every level.

TEST(KQuantDot, MatchesDequantizedDot) {
  for (GgmlType type : kWeightTypes) {
    for (int blocks : {1, 3, 8}) {
      const int64_t n = blocks * kN;
      const auto w = test::random_floats(static_cast<size_t>(n), 100 + blocks);
      const auto a = test::random_floats(static_cast<size_t>(n), 200 + blocks);
      const auto wq = quantize_ref(type, w);
      const auto aq = quantize_ref(GgmlType::Q8_K, a);
      const auto wd = dequantize_all(type, wq.data(), n, Isa::scalar);
      const auto ad = dequantize_all(GgmlType::Q8_K, aq.data(), n, Isa::scalar);
      double expected = 0, magnitude = 0;
      for (int64_t i = 0; i < n; ++i) {
        expected += static_cast<double>(wd[i]) * ad[i];
        magnitude += std::fabs(static_cast<double>(wd[i]) * ad[i]);
      }
      for (Isa isa : available_isas()) {
        const VecDotFn dot = kernels_exact(type, isa).vec_dot;
        if (!dot) continue;
        const float got = dot(n, wq.data(), aq.data());
        EXPECT_NEAR(got, expected, 2e-6 * magnitude)
            << ggml_type_name(type) << " " << isa_name(isa) << " blocks " << blocks;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Edge cases.

TEST(KQuantEdge, AllZeroSuperBlocks) {
  std::vector<float> x(3 * kN, 0.0f);
  for (int i = kN; i < 2 * kN; ++i) x[i] = std::sin(static_cast<float>(i));  // middle one non-zero
  for (GgmlType type : kWeightTypes) {
    const auto q = quantize_ref(type, x);
    for (Isa isa : available_isas()) {
      if (!kernels_exact(type, isa).dequantize_row) continue;
      const auto y = dequantize_all(type, q.data(), 3 * kN, isa);
      for (int i = 0; i < 3 * kN; ++i) {
        ASSERT_TRUE(std::isfinite(y[i])) << ggml_type_name(type) << " " << i;
        if (i < kN || i >= 2 * kN) {
          ASSERT_EQ(y[i], 0.0f) << ggml_type_name(type) << " " << i;
        }
      }
    }
    const auto a = quantize_ref(GgmlType::Q8_K, test::random_floats(3 * kN, 3));
    const auto zero_a = quantize_ref(GgmlType::Q8_K, std::vector<float>(3 * kN, 0.0f));
    for (Isa isa : available_isas()) {
      const VecDotFn dot = kernels_exact(type, isa).vec_dot;
      if (!dot) continue;
      EXPECT_TRUE(std::isfinite(dot(3 * kN, q.data(), a.data()))) << ggml_type_name(type);
      EXPECT_EQ(dot(3 * kN, q.data(), zero_a.data()), 0.0f) << ggml_type_name(type);
    }
  }
}

TEST(KQuantEdge, ConstantSuperBlocks) {
  // Constant rows, positive and negative: decoded close to the constant.
  for (GgmlType type : kWeightTypes) {
    for (float c : {0.75f, -0.75f}) {
      const std::vector<float> x(kN, c);
      const auto q = quantize_ref(type, x);
      const auto y = dequantize_all(type, q.data(), kN, Isa::scalar);
      for (int i = 0; i < kN; ++i) {
        ASSERT_NEAR(y[i], c, 0.01f) << ggml_type_name(type) << " c " << c << " i " << i;
      }
    }
  }
}

TEST(KQuantEdge, SingleHugeOutlier) {
  auto x = test::random_floats(2 * kN, 77);
  x[100] = 1000.0f;
  for (GgmlType type : kWeightTypes) {
    const auto q = quantize_ref(type, x);
    const auto y = dequantize_all(type, q.data(), 2 * kN, Isa::scalar);
    for (float v : y) ASSERT_TRUE(std::isfinite(v)) << ggml_type_name(type);
    EXPECT_NEAR(y[100], 1000.0f, 10.0f) << ggml_type_name(type);
    // The other super-block is unaffected.
    const double clean = test::nmse(y.data() + kN, x.data() + kN, kN);
    const double reference = roundtrip_nmse(type, std::vector<float>(x.begin() + kN, x.end()));
    EXPECT_DOUBLE_EQ(clean, reference) << ggml_type_name(type);
  }
}

TEST(KQuantEdge, OneBlockAndOddCounts) {
  for (GgmlType type : kWeightTypes) {
    for (int blocks : {1, 3, 7}) {
      const auto x = test::random_floats(static_cast<size_t>(blocks * kN), 9 + blocks);
      // Quantizing a longer row block by block gives the same bytes as one call.
      const auto whole = quantize_ref(type, x);
      const auto bytes = static_cast<size_t>(row_bytes(type, kN));
      for (int b = 0; b < blocks; ++b) {
        const auto one =
            quantize_ref(type, std::vector<float>(x.begin() + b * kN, x.begin() + (b + 1) * kN));
        ASSERT_EQ(std::memcmp(one.data(), whole.data() + b * bytes, bytes), 0)
            << ggml_type_name(type) << " block " << b;
      }
    }
  }
}

}  // namespace
}  // namespace strata::quant
