// The legacy formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1): block layout on hand-built blocks,
// quantize -> dequantize error bounds, dot product against the dequantized rows, edge cases, and
// bit-identical activation quantizers at every instruction-set level.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "gguf/gguf_file.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "support/test_support.h"

namespace strata::quant {
namespace {

constexpr f16_bits kHalfOne = 0x3c00;      // 1.0
constexpr f16_bits kHalfTwo = 0x4000;      // 2.0
constexpr f16_bits kHalfHalf = 0x3800;     // 0.5
constexpr f16_bits kHalfQuarter = 0x3400;  // 0.25
constexpr f16_bits kHalfEighth = 0x3000;   // 0.125
constexpr f16_bits kHalfMinusOne = 0xbc00;

const GgmlType kWeightTypes[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                                 GgmlType::Q8_0};

std::string level(Isa isa) {
  return "isa " + std::string(isa_name(isa));
}

template <typename Block>
std::vector<uint8_t> bytes_of(const std::vector<Block>& blocks) {
  std::vector<uint8_t> out(blocks.size() * sizeof(Block));
  std::memcpy(out.data(), blocks.data(), out.size());
  return out;
}

std::vector<uint8_t> quantize(GgmlType type, const std::vector<float>& x, Isa isa = Isa::scalar) {
  std::vector<uint8_t> q(static_cast<size_t>(row_bytes(type, static_cast<int64_t>(x.size()))));
  kernels_at(type, isa).quantize_row(x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

std::vector<float> dequantize(GgmlType type, const uint8_t* q, int64_t n, Isa isa = Isa::scalar) {
  std::vector<float> out(static_cast<size_t>(n));
  kernels_at(type, isa).dequantize_row(q, out.data(), n);
  return out;
}

// Every level decodes the block bytes to exactly `expected`.
void expect_decodes_to(GgmlType type, const std::vector<uint8_t>& bytes,
                       const std::vector<float>& expected) {
  for (Isa isa : available_isas()) {
    const auto got = dequantize(type, bytes.data(), static_cast<int64_t>(expected.size()), isa);
    for (size_t j = 0; j < expected.size(); ++j) {
      ASSERT_EQ(got[j], expected[j]) << ggml_type_name(type) << " " << level(isa) << " j=" << j;
    }
  }
}

// An activation block of Q8_0 with d = 1 and the given codes.
BlockQ8_0 q8_0_block(const int8_t (&codes)[kQK]) {
  BlockQ8_0 b{};
  b.d = kHalfOne;
  std::memcpy(b.qs, codes, sizeof codes);
  return b;
}

// ---- layout: hand-built blocks ----------------------------------------------------------------

TEST(LegacyLayout, Q4_0) {
  BlockQ4_0 b{};
  b.d = kHalfHalf;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>((j & 0x0f) | ((15 - j) << 4));
  std::vector<float> expected(32);
  for (int j = 0; j < 16; ++j) {
    expected[j] = (j - 8) * 0.5f;              // low nibble j
    expected[j + 16] = ((15 - j) - 8) * 0.5f;  // high nibble 15 - j
  }
  // Spot values written out: qs[0] = 0xf0 -> element 0 = (0 - 8) * 0.5, element 16 = 7 * 0.5.
  EXPECT_EQ(b.qs[0], 0xf0);
  EXPECT_EQ(expected[0], -4.0f);
  EXPECT_EQ(expected[16], 3.5f);
  expect_decodes_to(GgmlType::Q4_0, bytes_of(std::vector{b}), expected);
}

TEST(LegacyLayout, Q4_1) {
  BlockQ4_1 b{};
  b.d = kHalfQuarter;
  b.m = kHalfMinusOne;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (((j * 7) & 15) << 4));
  std::vector<float> expected(32);
  for (int j = 0; j < 16; ++j) {
    expected[j] = j * 0.25f - 1.0f;
    expected[j + 16] = ((j * 7) & 15) * 0.25f - 1.0f;
  }
  EXPECT_EQ(expected[1], -0.75f);  // qs[1] = 0x71: low nibble 1
  EXPECT_EQ(expected[17], 0.75f);  // high nibble 7
  EXPECT_EQ(expected[15], 2.75f);  // 15 * 0.25 - 1
  expect_decodes_to(GgmlType::Q4_1, bytes_of(std::vector{b}), expected);
}

// qh bits 0, 9, 16 and 31 set: elements 0, 9, 16 and 31 get 16 added to their nibble.
constexpr uint8_t kQh[4] = {0x01, 0x02, 0x01, 0x80};
bool high_bit(int j) {
  return j == 0 || j == 9 || j == 16 || j == 31;
}

TEST(LegacyLayout, Q5_0) {
  BlockQ5_0 b{};
  b.d = kHalfOne;
  std::memcpy(b.qh, kQh, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  std::vector<float> expected(32);
  for (int j = 0; j < 32; ++j) {
    const int nibble = j < 16 ? j : 15 - (j - 16);
    expected[j] = static_cast<float>((nibble | (high_bit(j) ? 16 : 0)) - 16);
  }
  EXPECT_EQ(expected[0], 0.0f);    // nibble 0 + 16 - 16
  EXPECT_EQ(expected[1], -15.0f);  // nibble 1, no high bit
  EXPECT_EQ(expected[16], 15.0f);  // nibble 15 + 16 - 16
  EXPECT_EQ(expected[31], 0.0f);   // nibble 0 + 16 - 16
  EXPECT_EQ(expected[30], -15.0f);
  expect_decodes_to(GgmlType::Q5_0, bytes_of(std::vector{b}), expected);
}

TEST(LegacyLayout, Q5_1) {
  BlockQ5_1 b{};
  b.d = kHalfHalf;
  b.m = kHalfTwo;
  std::memcpy(b.qh, kQh, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  std::vector<float> expected(32);
  for (int j = 0; j < 32; ++j) {
    const int nibble = j < 16 ? j : 15 - (j - 16);
    expected[j] = (nibble | (high_bit(j) ? 16 : 0)) * 0.5f + 2.0f;
  }
  EXPECT_EQ(expected[0], 10.0f);   // 16 * 0.5 + 2
  EXPECT_EQ(expected[9], 14.5f);   // 25 * 0.5 + 2
  EXPECT_EQ(expected[16], 17.5f);  // 31 * 0.5 + 2
  EXPECT_EQ(expected[17], 9.0f);   // 14 * 0.5 + 2
  expect_decodes_to(GgmlType::Q5_1, bytes_of(std::vector{b}), expected);
}

TEST(LegacyLayout, Q8_0AndQ8_1) {
  BlockQ8_0 b0{};
  b0.d = kHalfEighth;
  BlockQ8_1 b1{};
  b1.d = kHalfTwo;
  b1.s = 0x7c00;  // s does not take part in decoding
  std::vector<float> e0(32), e1(32);
  for (int j = 0; j < 32; ++j) {
    const int q = j == 31 ? -128 : (j - 16) * 7;
    b0.qs[j] = static_cast<int8_t>(q);
    b1.qs[j] = static_cast<int8_t>(q);
    e0[j] = q * 0.125f;
    e1[j] = q * 2.0f;
  }
  EXPECT_EQ(e0[0], -14.0f);
  EXPECT_EQ(e0[31], -16.0f);
  expect_decodes_to(GgmlType::Q8_0, bytes_of(std::vector{b0}), e0);
  expect_decodes_to(GgmlType::Q8_1, bytes_of(std::vector{b1}), e1);
}

// Dot products on hand-built blocks: weights as in the layout tests, activations all 1 (so the
// result is the sum of the weight values) and then codes 0..31.
TEST(LegacyLayout, DotProductsOfHandBuiltBlocks) {
  int8_t ones[kQK], ramp[kQK];
  for (int j = 0; j < kQK; ++j) {
    ones[j] = 1;
    ramp[j] = static_cast<int8_t>(j);
  }
  BlockQ4_0 w40{};
  w40.d = kHalfHalf;
  for (int j = 0; j < 16; ++j) w40.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  // Values (j - 8) * 0.5 for j < 16 and (15 - (j - 16) - 8) * 0.5 for j >= 16.
  double ramp40 = 0;
  for (int j = 0; j < 32; ++j) ramp40 += j * ((j < 16 ? j : 31 - j) - 8) * 0.5;
  BlockQ5_0 w50{};
  w50.d = kHalfOne;
  std::memcpy(w50.qh, kQh, 4);
  for (int j = 0; j < 16; ++j) w50.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  double ramp50 = 0;
  for (int j = 0; j < 32; ++j) {
    ramp50 += j * (((j < 16 ? j : 31 - j) | (high_bit(j) ? 16 : 0)) - 16);
  }
  // Q4_1 / Q5_1 against Q8_1: d = 1, s = sum(codes) = 32 for ones, 496 for the ramp.
  BlockQ4_1 w41{};
  w41.d = kHalfQuarter;
  w41.m = kHalfMinusOne;
  for (int j = 0; j < 16; ++j) w41.qs[j] = static_cast<uint8_t>(j | (j << 4));
  double ramp41 = 0;
  for (int j = 0; j < 32; ++j) ramp41 += j * ((j & 15) * 0.25 - 1.0);
  BlockQ8_1 a81{};
  a81.d = kHalfOne;
  a81.s = 0x5fc0;  // 496.0
  std::memcpy(a81.qs, ramp, sizeof ramp);

  for (Isa isa : available_isas()) {
    SCOPED_TRACE(level(isa));
    const auto dot = [&](GgmlType t, const auto& w, const auto& a) {
      return kernels_at(t, isa).vec_dot(kQK, &w, &a);
    };
    EXPECT_EQ(dot(GgmlType::Q4_0, w40, q8_0_block(ones)), -8.0f);  // 2 * sum(j - 8) * 0.5
    EXPECT_EQ(dot(GgmlType::Q4_0, w40, q8_0_block(ramp)), static_cast<float>(ramp40));
    EXPECT_EQ(dot(GgmlType::Q5_0, w50, q8_0_block(ramp)), static_cast<float>(ramp50));
    EXPECT_EQ(dot(GgmlType::Q4_1, w41, a81), static_cast<float>(ramp41));
  }
  // Hand checks of the loops above: sum_j j * value_j.
  EXPECT_EQ(ramp40, -124.0);
  EXPECT_EQ(ramp50, -3320.0);
  EXPECT_EQ(ramp41, 604.0);
}

// ---- quantize -> dequantize -------------------------------------------------------------------

// Gaussian data, 64 Ki elements: measured NMSE of the reference quantizers (scalar) with modest
// headroom. Measured: Q4_0 7.45e-3, Q4_1 6.17e-3, Q5_0 1.82e-3, Q5_1 1.43e-3, Q8_0 2.88e-5,
// Q8_1 2.88e-5.
double nmse_bound(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0:
      return 8.5e-3;
    case GgmlType::Q4_1:
      return 7e-3;
    case GgmlType::Q5_0:
      return 2.1e-3;
    case GgmlType::Q5_1:
      return 1.65e-3;
    case GgmlType::Q8_0:
    case GgmlType::Q8_1:
      return 3.3e-5;
    default:
      return 0;
  }
}

TEST(LegacyQuality, GaussianRoundTripNmse) {
  const int64_t n = 64 * 1024;
  const auto x = test::random_floats(static_cast<size_t>(n), 1234);
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                        GgmlType::Q8_0, GgmlType::Q8_1}) {
    for (Isa isa : available_isas()) {
      const auto q = quantize(type, x, isa);
      const auto y = dequantize(type, q.data(), n, isa);
      const double e = test::nmse(y.data(), x.data(), static_cast<size_t>(n));
      EXPECT_LT(e, nmse_bound(type)) << ggml_type_name(type) << " " << level(isa);
      if (isa == Isa::scalar) RecordProperty(std::string(ggml_type_name(type)) + "_nmse", e);
    }
  }
}

float f16_value(f16_bits h) {
  return f16_to_f32(h);
}

// Max-abs quantizers: every element within half a step |d| of its input (d is stored rounded to
// f16, which moves code k by |k| * |d| * 2^-11). Q4_0 / Q5_0 have one more code on the side of the
// extreme value (d = extreme / -8): inputs on the other side beyond 7.5 (15.5) steps are clamped
// to the last code, within one step.
TEST(LegacyQuality, MaxAbsErrorWithinHalfStep) {
  const int64_t n = 32 * 2048;
  const auto x = test::random_floats(static_cast<size_t>(n), 99, 3.0f);
  struct Case {
    GgmlType type;
    size_t block_bytes;
    int max_code;      // largest |code| after the offset
    float half_range;  // codes reach this many steps on the short side without clamping
  };
  for (const Case c : {Case{GgmlType::Q4_0, sizeof(BlockQ4_0), 8, 7.5f},
                       Case{GgmlType::Q5_0, sizeof(BlockQ5_0), 16, 15.5f},
                       Case{GgmlType::Q8_0, sizeof(BlockQ8_0), 127, 127.0f}}) {
    const auto q = quantize(c.type, x);
    const auto y = dequantize(c.type, q.data(), n);
    for (int64_t b = 0; b < n / kQK; ++b) {
      f16_bits dh;
      std::memcpy(&dh, q.data() + b * c.block_bytes, sizeof dh);  // d is first in every block
      const float d = std::fabs(f16_value(dh));
      ASSERT_GT(d, 0.0f);
      for (int j = 0; j < kQK; ++j) {
        const size_t i = static_cast<size_t>(b * kQK + j);
        const float err = std::fabs(y[i] - x[i]);
        const float rounding = c.max_code * d * 0x1p-11f + 1e-6f * std::fabs(x[i]);
        // d is compared in its f16 rounding: anything that may lie beyond the last code counts.
        const bool clamped = std::fabs(x[i]) > c.half_range * d * (1 - 0x1p-10f);
        const float bound = (clamped ? 1.0f : 0.5f) * d + rounding;
        ASSERT_LE(err, bound) << ggml_type_name(c.type) << " block " << b << " j " << j << " x "
                              << x[i] << " y " << y[i] << " d " << d;
      }
    }
  }
}

// Min/max quantizers: within half a step of the input, plus the f16 rounding of d and m.
TEST(LegacyQuality, MinMaxErrorWithinHalfStep) {
  const int64_t n = 32 * 2048;
  const auto x = test::random_floats(static_cast<size_t>(n), 98, 3.0f);
  for (const auto& [type, block_bytes, max_code] :
       {std::tuple{GgmlType::Q4_1, sizeof(BlockQ4_1), 15},
        std::tuple{GgmlType::Q5_1, sizeof(BlockQ5_1), 31}}) {
    const auto q = quantize(type, x);
    const auto y = dequantize(type, q.data(), n);
    for (int64_t b = 0; b < n / kQK; ++b) {
      f16_bits dm[2];
      std::memcpy(dm, q.data() + b * block_bytes, sizeof dm);
      const float d = f16_value(dm[0]), m = f16_value(dm[1]);
      ASSERT_GE(d, 0.0f);
      for (int j = 0; j < kQK; ++j) {
        const size_t i = static_cast<size_t>(b * kQK + j);
        const float bound =
            0.5f * d + (max_code * d + std::fabs(m)) * 0x1p-11f + 1e-6f * std::fabs(x[i]);
        ASSERT_LE(std::fabs(y[i] - x[i]), bound) << ggml_type_name(type) << " block " << b;
      }
    }
  }
}

// The reference quantizers on known inputs: the extreme maps to the last code exactly.
TEST(LegacyQuality, ReferenceQuantizerKnownBlocks) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 8);  // -8 .. 23, extreme +23
  {
    const auto q = quantize(GgmlType::Q4_0, x);
    BlockQ4_0 b;
    std::memcpy(&b, q.data(), sizeof b);
    EXPECT_EQ(f16_value(b.d), f16_value(f32_to_f16(23.0f / -8.0f)));
    EXPECT_EQ(b.qs[15] >> 4, 0);  // element 31 = 23 = -8 * d -> code 0
    EXPECT_EQ(dequantize(GgmlType::Q4_0, q.data(), 32)[31], -8 * f16_value(b.d));
  }
  {
    const auto q = quantize(GgmlType::Q5_0, x);
    BlockQ5_0 b;
    std::memcpy(&b, q.data(), sizeof b);
    EXPECT_EQ(b.qs[15] >> 4, 0);
    EXPECT_EQ(b.qh[3] & 0x80, 0);  // code 0: no high bit for element 31
    // Element 0 = -8: -8 / d = 8 * 16 / 23 = 5.57 -> code 16 + 5.57 + 0.5 -> 22: nibble 6, high
    // bit set.
    EXPECT_EQ(b.qs[0] & 0x0f, 6);
    EXPECT_EQ(b.qh[0] & 0x01, 1);
  }
  {
    const auto q = quantize(GgmlType::Q4_1, x);
    BlockQ4_1 b;
    std::memcpy(&b, q.data(), sizeof b);
    EXPECT_EQ(f16_value(b.m), -8.0f);
    EXPECT_EQ(f16_value(b.d), f16_value(f32_to_f16(31.0f / 15.0f)));
    EXPECT_EQ(b.qs[0] & 0x0f, 0);  // min -> code 0
    EXPECT_EQ(b.qs[15] >> 4, 15);  // max -> code 15
  }
  {
    const auto q = quantize(GgmlType::Q8_1, x);
    BlockQ8_1 b;
    std::memcpy(&b, q.data(), sizeof b);
    EXPECT_EQ(b.qs[31], 127);
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += b.qs[j];
    EXPECT_EQ(f16_value(b.s), f16_value(f32_to_f16(sum * (23.0f / 127.0f))));
  }
}

// ---- dot products against the dequantized rows ------------------------------------------------

// vec_dot(wq, aq) is the dot product of what the rows decode to. Q4_0 / Q5_0 / Q8_0: exactly
// (codes times f16 scales are exact in float), up to the float rounding of the result and the
// float accumulation of the faster levels. Q4_1 / Q5_1: the m term uses the activation block's
// f16 s = d * sum(codes), off by up to 2^-11 of it.
TEST(LegacyDot, MatchesDequantizedDot) {
  for (GgmlType type : kWeightTypes) {
    const GgmlType act = traits(type).activation_type;
    for (int64_t blocks : {1, 2, 3, 4, 5, 7, 8, 9, 33, 128}) {
      const int64_t n = blocks * kQK;
      const auto wq = quantize(type, test::random_floats(static_cast<size_t>(n), 7 + blocks));
      const auto aq = quantize(act, test::random_floats(static_cast<size_t>(n), 8 + blocks));
      const auto wd = dequantize(type, wq.data(), n);
      const auto ad = dequantize(act, aq.data(), n);
      double expected = 0, magnitude = 0, s_slack = 0;
      for (int64_t i = 0; i < n; ++i) {
        expected += static_cast<double>(wd[i]) * ad[i];
        magnitude += std::fabs(static_cast<double>(wd[i]) * ad[i]);
      }
      if (act == GgmlType::Q8_1) {
        const size_t wb = static_cast<size_t>(traits(type).block_bytes);
        for (int64_t b = 0; b < blocks; ++b) {
          f16_bits m, s;
          std::memcpy(&m, wq.data() + b * wb + 2, 2);
          std::memcpy(&s, aq.data() + b * sizeof(BlockQ8_1) + 2, 2);
          // s is rounded to f16 and was computed from the unrounded d: 2^-10 of it.
          s_slack += std::fabs(static_cast<double>(f16_value(m)) * f16_value(s)) * 0x1p-10;
        }
      }
      for (Isa isa : available_isas()) {
        const float got = kernels_at(type, isa).vec_dot(n, wq.data(), aq.data());
        // The scalar reference accumulates in double: only the final rounding to float (and for
        // Q4_1 / Q5_1 the rounding of the dequantized q * d + m, 2^-24 of each term).
        const double deq_rounding = act == GgmlType::Q8_1 ? 0x1p-23 * magnitude : 0.0;
        const double slack = isa == Isa::scalar
                                 ? 0x1p-24 * std::fabs(expected) + 1e-12 * magnitude + deq_rounding
                                 : 2e-6 * magnitude;
        EXPECT_NEAR(got, expected, slack + s_slack + 1e-30)
            << ggml_type_name(type) << " blocks " << blocks << " " << level(isa);
      }
    }
  }
}

// ---- edge cases -------------------------------------------------------------------------------

TEST(LegacyEdge, AllZeroBlocks) {
  const std::vector<float> zeros(3 * kQK, 0.0f);
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                        GgmlType::Q8_0, GgmlType::Q8_1}) {
    for (Isa isa : available_isas()) {
      const auto q = quantize(type, zeros, isa);
      f16_bits d;
      std::memcpy(&d, q.data(), 2);
      EXPECT_EQ(f16_value(d), 0.0f) << ggml_type_name(type);
      for (float v : dequantize(type, q.data(), 3 * kQK, isa)) {
        ASSERT_EQ(v, 0.0f) << ggml_type_name(type) << " " << level(isa);
      }
    }
  }
  // Zero weights against zero and random activations: 0, not NaN.
  const auto x = test::random_floats(3 * kQK, 5);
  for (GgmlType type : kWeightTypes) {
    const GgmlType act = traits(type).activation_type;
    const auto wq = quantize(type, zeros);
    for (const auto& a : {zeros, x}) {
      const auto aq = quantize(act, a);
      for (Isa isa : available_isas()) {
        EXPECT_EQ(kernels_at(type, isa).vec_dot(3 * kQK, wq.data(), aq.data()), 0.0f)
            << ggml_type_name(type) << " " << level(isa);
      }
    }
  }
}

// Large magnitudes (up to ~4e4, still inside f16 for d and m): relative error as at scale 1.
TEST(LegacyEdge, LargeValues) {
  const int64_t n = 32 * 256;
  const auto x = test::random_floats(static_cast<size_t>(n), 77, 1e4f);
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                        GgmlType::Q8_0, GgmlType::Q8_1}) {
    for (Isa isa : available_isas()) {
      const auto q = quantize(type, x, isa);
      const auto y = dequantize(type, q.data(), n, isa);
      for (float v : y) ASSERT_TRUE(std::isfinite(v)) << ggml_type_name(type);
      EXPECT_LT(test::nmse(y.data(), x.data(), static_cast<size_t>(n)), nmse_bound(type))
          << ggml_type_name(type) << " " << level(isa);
    }
  }
}

// A single block, constant blocks (max == min), and Q8_0 weight codes of -128 (valid in files,
// never written by the quantizer), at every level.
TEST(LegacyEdge, SingleAndDegenerateBlocks) {
  const auto x = test::random_floats(kQK, 3);
  const auto a = test::random_floats(kQK, 4);
  const std::vector<float> constant(kQK, -1.5f);
  for (GgmlType type : kWeightTypes) {
    const GgmlType act = traits(type).activation_type;
    const auto aq = quantize(act, a);
    for (const auto& w : {x, constant}) {
      const auto wq = quantize(type, w);
      const float ref = kernels_at(type, Isa::scalar).vec_dot(kQK, wq.data(), aq.data());
      ASSERT_TRUE(std::isfinite(ref));
      for (Isa isa : available_isas()) {
        EXPECT_NEAR(kernels_at(type, isa).vec_dot(kQK, wq.data(), aq.data()), ref,
                    1e-5f * (std::fabs(ref) + 1.0f))
            << ggml_type_name(type) << " " << level(isa);
      }
    }
  }
  const auto yc = dequantize(GgmlType::Q4_1, quantize(GgmlType::Q4_1, constant).data(), kQK);
  for (float v : yc) EXPECT_EQ(v, -1.5f);

  std::vector<BlockQ8_0> w(5);
  for (auto& b : w) {
    b.d = kHalfHalf;
    for (int j = 0; j < kQK; ++j) b.qs[j] = static_cast<int8_t>(j % 3 == 0 ? -128 : 127 - j);
  }
  const auto a5 = quantize(GgmlType::Q8_0, test::random_floats(5 * kQK, 6));
  const float ref = kernels_at(GgmlType::Q8_0, Isa::scalar).vec_dot(5 * kQK, w.data(), a5.data());
  for (Isa isa : available_isas()) {
    EXPECT_NEAR(kernels_at(GgmlType::Q8_0, isa).vec_dot(5 * kQK, w.data(), a5.data()), ref,
                1e-5f * std::fabs(ref))
        << level(isa);
  }
}

// Rows at addresses with no alignment beyond the 2 bytes of the blocks' f16 fields (as in a GGUF
// file, where a row starts anywhere after the 32-byte aligned tensor start): every offset mod 64.
TEST(LegacyEdge, UnalignedRows) {
  const int64_t n = 7 * kQK;
  for (GgmlType type : kWeightTypes) {
    const GgmlType act = traits(type).activation_type;
    const auto wq = quantize(type, test::random_floats(static_cast<size_t>(n), 11));
    const auto aq = quantize(act, test::random_floats(static_cast<size_t>(n), 12));
    const auto ref = dequantize(type, wq.data(), n);
    std::vector<uint8_t> wbuf(wq.size() + 128), abuf(aq.size() + 128);
    const auto base = [](std::vector<uint8_t>& v) {  // 64-byte aligned start inside v
      const auto addr = reinterpret_cast<uintptr_t>(v.data());
      return v.data() + (64 - addr % 64) % 64;
    };
    for (Isa isa : available_isas()) {
      const TypeKernels k = kernels_at(type, isa);
      const float expected = k.vec_dot(n, wq.data(), aq.data());
      for (int offset = 0; offset < 64; offset += 2) {
        uint8_t* w = base(wbuf) + offset;
        uint8_t* a = base(abuf) + (offset * 7) % 64;
        std::memcpy(w, wq.data(), wq.size());
        std::memcpy(a, aq.data(), aq.size());
        ASSERT_EQ(k.vec_dot(n, w, a), expected)
            << ggml_type_name(type) << " " << level(isa) << " offset " << offset;
        std::vector<float> out(static_cast<size_t>(n) + 1);
        k.dequantize_row(w, out.data() + 1, n);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[static_cast<size_t>(i) + 1], ref[i]);
      }
    }
  }
}

// ---- levels agree bit for bit -----------------------------------------------------------------

// The activation quantizers compute the same d, 1/d and rounding (ties away from zero) at every
// level, so their blocks are identical bytes; dequantization is identical floats.
TEST(LegacyLevels, ActivationQuantizersAreBitIdentical) {
  std::vector<float> x = test::random_floats(32 * 65, 21);
  // Block 0: d = 127 / 127 = 1, so the other elements are exact ties k + 0.5, rounded away from
  // zero. Block 1: zeros.
  x[0] = 127.0f;
  for (int j = 1; j < kQK; ++j) x[j] = static_cast<float>(j - 16) + 0.5f;
  for (int j = kQK; j < 2 * kQK; ++j) x[j] = 0.0f;
  {
    const auto q = quantize(GgmlType::Q8_0, x);
    BlockQ8_0 b;
    std::memcpy(&b, q.data(), sizeof b);
    EXPECT_EQ(f16_value(b.d), 1.0f);
    EXPECT_EQ(b.qs[1], -15);  // -14.5
    EXPECT_EQ(b.qs[15], -1);  // -0.5
    EXPECT_EQ(b.qs[16], 1);   // 0.5
    EXPECT_EQ(b.qs[18], 3);   // 2.5
  }
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q8_1}) {
    const auto ref = quantize(type, x);
    for (Isa isa : available_isas()) {
      EXPECT_EQ(quantize(type, x, isa), ref) << ggml_type_name(type) << " " << level(isa);
    }
  }
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                        GgmlType::Q8_0, GgmlType::Q8_1}) {
    const auto q = quantize(type, x);
    const auto ref = dequantize(type, q.data(), static_cast<int64_t>(x.size()));
    for (Isa isa : available_isas()) {
      EXPECT_EQ(dequantize(type, q.data(), static_cast<int64_t>(x.size()), isa), ref)
          << ggml_type_name(type) << " " << level(isa);
    }
  }
}

// ---- bit compatibility with another GGUF quantizer
// -----------------------------------------------

// The oracle's Q4_0 .. Q8_0 models were written by a widely used GGUF quantizer from the F16
// model's weights: re-quantizing those F16 weights with the reference quantizers (and, for Q8_0,
// the activation quantizer of every level) reproduces the files' blocks byte for byte.
TEST(LegacyOracle, QuantizersReproduceTheOracleFiles) {
  const auto dir = test::oracle_dir() / "models";
  const GgufFile f16 = GgufFile::open((dir / "tiny-qwen3moe-F16.gguf").string());
  std::map<GgmlType, int64_t> blocks_checked;
  for (const char* name : {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"}) {
    const GgufFile q =
        GgufFile::open((dir / ("tiny-qwen3moe-" + std::string(name) + ".gguf")).string());
    for (const auto& t : q.tensors()) {
      const bool legacy = t.type == GgmlType::Q4_0 || t.type == GgmlType::Q4_1 ||
                          t.type == GgmlType::Q5_0 || t.type == GgmlType::Q5_1 ||
                          t.type == GgmlType::Q8_0;
      const GgufTensorInfo* src = f16.find_tensor(t.name);
      if (!legacy || src == nullptr || src->type != GgmlType::F16) continue;
      SCOPED_TRACE(std::string(name) + " file, " + t.name);
      ASSERT_EQ(src->shape, t.shape);
      const int64_t n = src->elements();
      std::vector<float> x(static_cast<size_t>(n));
      kernels_at(GgmlType::F16, Isa::scalar).dequantize_row(src->data.data(), x.data(), n);
      ASSERT_EQ(t.data.size(), static_cast<size_t>(row_bytes(t.type, n)));
      for (Isa isa : available_isas()) {
        if (isa != Isa::scalar && t.type != GgmlType::Q8_0) continue;  // weight quantizers: scalar
        const auto mine = quantize(t.type, x, isa);
        ASSERT_EQ(std::memcmp(mine.data(), t.data.data(), mine.size()), 0) << level(isa);
      }
      blocks_checked[t.type] += n / kQK;
    }
  }
  for (GgmlType type : kWeightTypes) {
    EXPECT_GT(blocks_checked[type], 1000) << ggml_type_name(type);
  }
}

}  // namespace
}  // namespace strata::quant
