// The float formats (F32, F16, BF16): bit patterns decode to known values, conversions round to
// nearest even (ties, overflow, subnormals, NaN), every level converts bit-identically, round-trip
// error bounds, dot products against a double dot of the decoded rows, and rows of any length
// (tails), at unaligned addresses, without writing past the end.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "quant/quant.h"
#include "support/test_support.h"
#include "util/fp16.h"

namespace strata::quant {
namespace {

const GgmlType kFloatTypes[] = {GgmlType::F32, GgmlType::F16, GgmlType::BF16};
const int64_t kLengths[] = {1,  2,  7,  8,   9,   15,  16,  17,  31,  32,   33,
                            63, 64, 65, 100, 127, 128, 129, 255, 257, 1000, 4096 + 33};

std::string level(Isa isa) {
  return "isa " + std::string(isa_name(isa));
}

size_t element_bytes(GgmlType type) {
  return type == GgmlType::F32 ? 4 : 2;
}

std::vector<uint8_t> convert(GgmlType type, const std::vector<float>& x, Isa isa = Isa::scalar) {
  std::vector<uint8_t> out(x.size() * element_bytes(type));
  kernels_at(type, isa).quantize_row(x.data(), out.data(), static_cast<int64_t>(x.size()));
  return out;
}

std::vector<float> decode(GgmlType type, const std::vector<uint8_t>& bytes, Isa isa = Isa::scalar) {
  const int64_t n = static_cast<int64_t>(bytes.size() / element_bytes(type));
  std::vector<float> out(static_cast<size_t>(n));
  kernels_at(type, isa).dequantize_row(bytes.data(), out.data(), n);
  return out;
}

std::vector<uint8_t> halves(const std::vector<uint16_t>& h) {
  std::vector<uint8_t> out(h.size() * 2);
  std::memcpy(out.data(), h.data(), out.size());
  return out;
}

std::vector<uint16_t> as_halves(const std::vector<uint8_t>& bytes) {
  std::vector<uint16_t> out(bytes.size() / 2);
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

// Floats and what they convert to, at every level and at every position of a row (so that both
// the vector body and the tail see them).
void expect_converts(GgmlType type, const std::vector<float>& x,
                     const std::vector<uint16_t>& want) {
  for (Isa isa : available_isas()) {
    for (int64_t rep : {1, 5}) {  // 1: tail only; 5 copies: vector body and tail
      std::vector<float> row;
      for (int64_t r = 0; r < rep; ++r) row.insert(row.end(), x.begin(), x.end());
      const auto got = as_halves(convert(type, row, isa));
      for (size_t i = 0; i < row.size(); ++i) {
        ASSERT_EQ(got[i], want[i % want.size()])
            << ggml_type_name(type) << " " << level(isa) << " x=" << row[i] << " i=" << i;
      }
    }
  }
}

// ---- bit patterns -----------------------------------------------------------------------------

TEST(FloatLayout, F16BitPatternsDecode) {
  const std::vector<uint16_t> bits = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x03ff, 0x0400,
                                      0x7c00, 0xfc00, 0x8000, 0x3555, 0x0000};
  const std::vector<float> want = {1.0f,     -2.0f,    65504.0f,  0x1p-24f, 1023 * 0x1p-24f,
                                   0x1p-14f, INFINITY, -INFINITY, -0.0f,    0x1.554p-2f,
                                   0.0f};
  for (Isa isa : available_isas()) {
    const auto got = decode(GgmlType::F16, halves(bits), isa);
    for (size_t i = 0; i < bits.size(); ++i) {
      EXPECT_EQ(got[i], want[i]) << level(isa) << " bits " << std::hex << bits[i];
      EXPECT_EQ(std::signbit(got[i]), std::signbit(want[i]));
    }
    EXPECT_TRUE(std::isnan(decode(GgmlType::F16, halves({0x7e00}), isa)[0]));
  }
}

TEST(FloatLayout, Bf16BitPatternsDecode) {
  const std::vector<uint16_t> bits = {0x3f80, 0xc040, 0x7f7f, 0x0001, 0x0080,
                                      0x7f80, 0xff80, 0x8000, 0x3eab};
  const std::vector<float> want = {1.0f,     -3.0f,     0x1.fep127f, 0x1p-133f, 0x1p-126f,
                                   INFINITY, -INFINITY, -0.0f,       0x1.56p-2f};
  for (Isa isa : available_isas()) {
    const auto got = decode(GgmlType::BF16, halves(bits), isa);
    for (size_t i = 0; i < bits.size(); ++i) {
      EXPECT_EQ(got[i], want[i]) << level(isa) << " bits " << std::hex << bits[i];
      EXPECT_EQ(std::signbit(got[i]), std::signbit(want[i]));
    }
    EXPECT_TRUE(std::isnan(decode(GgmlType::BF16, halves({0x7fc0}), isa)[0]));
  }
}

TEST(FloatLayout, F16RoundsToNearestEven) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  expect_converts(GgmlType::F16,
                  {1.0f, 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-11f + 0x1p-20f, -2.5f,
                   65504.0f, 65519.0f, 65520.0f, 1e9f, -1e9f, INFINITY, 0x1p-25f, 3 * 0x1p-25f,
                   0x1p-26f, 0x1p-14f, -0.0f, nan, 0.1f},
                  {0x3c00, 0x3c00, 0x3c02, 0x3c01, 0xc100, 0x7bff, 0x7bff, 0x7c00, 0x7c00, 0xfc00,
                   0x7c00, 0x0000, 0x0002, 0x0000, 0x0400, 0x8000, 0x7e00, 0x2e66});
}

TEST(FloatLayout, Bf16RoundsToNearestEven) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  expect_converts(
      GgmlType::BF16,
      {1.0f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, -3.0f,
       std::numeric_limits<float>::max(), INFINITY, -INFINITY, 0x1p-133f, -0.0f, nan, 0.1f},
      {0x3f80, 0x3f80, 0x3f82, 0x3f81, 0xc040, 0x7f80, 0x7f80, 0xff80, 0x0001, 0x8000, 0x7fc0,
       0x3dcd});
}

TEST(FloatLayout, F32IsIdentity) {
  const auto x = test::random_floats(100, 3);
  for (Isa isa : available_isas()) {
    const auto bytes = convert(GgmlType::F32, x, isa);
    EXPECT_EQ(std::memcmp(bytes.data(), x.data(), bytes.size()), 0);
    EXPECT_EQ(decode(GgmlType::F32, bytes, isa), x);
  }
}

// ---- every level agrees bit for bit -----------------------------------------------------------

TEST(FloatLevels, ConversionsAreBitIdentical) {
  for (GgmlType type : {GgmlType::F16, GgmlType::BF16}) {
    for (int64_t n : kLengths) {
      auto x = test::random_floats(static_cast<size_t>(n), 40 + static_cast<uint32_t>(n), 100.0f);
      const auto ref = convert(type, x);
      const auto ref_decoded = decode(type, ref);
      for (Isa isa : available_isas()) {
        ASSERT_EQ(convert(type, x, isa), ref) << ggml_type_name(type) << " n=" << n << level(isa);
        ASSERT_EQ(decode(type, ref, isa), ref_decoded)
            << ggml_type_name(type) << " n=" << n << level(isa);
      }
    }
  }
}

// ---- round trip -------------------------------------------------------------------------------

// Measured on Gaussian data: F16 4.31e-8 (2^-11 relative rounding), BF16 2.77e-6 (2^-8).
TEST(FloatQuality, GaussianRoundTripNmse) {
  const int64_t n = 64 * 1024;
  const auto x = test::random_floats(static_cast<size_t>(n), 1234);
  struct Bound {
    GgmlType type;
    double nmse;
    double max_relative;  // half an ulp of the format
  };
  for (const Bound b : {Bound{GgmlType::F32, 0.0, 0.0}, Bound{GgmlType::F16, 5e-8, 0x1p-11},
                        Bound{GgmlType::BF16, 3.2e-6, 0x1p-8}}) {
    for (Isa isa : available_isas()) {
      const auto y = decode(b.type, convert(b.type, x, isa), isa);
      const double e = test::nmse(y.data(), x.data(), static_cast<size_t>(n));
      EXPECT_LE(e, b.nmse) << ggml_type_name(b.type) << " " << level(isa);
      if (isa == Isa::scalar) RecordProperty(std::string(ggml_type_name(b.type)) + "_nmse", e);
      for (int64_t i = 0; i < n; ++i) {
        // Gaussian data stays above the f16 subnormal range except near 0: absolute slack 2^-25.
        ASSERT_LE(std::fabs(y[i] - x[i]), b.max_relative * std::fabs(x[i]) + 0x1p-25)
            << ggml_type_name(b.type) << " x=" << x[i];
      }
    }
  }
}

// ---- dot products -----------------------------------------------------------------------------

// vec_dot equals the double dot of the decoded rows: the scalar reference up to its final rounding
// to float, the faster levels within their float accumulation (at most n / 8 additions per lane).
TEST(FloatDot, MatchesDecodedDot) {
  for (GgmlType type : kFloatTypes) {
    for (int64_t n : kLengths) {
      const auto wq = convert(type, test::random_floats(static_cast<size_t>(n), 70 + n));
      const auto aq = convert(type, test::random_floats(static_cast<size_t>(n), 71 + n));
      const auto wd = decode(type, wq), ad = decode(type, aq);
      double expected = 0, magnitude = 0;
      for (int64_t i = 0; i < n; ++i) {
        expected += static_cast<double>(wd[i]) * ad[i];
        magnitude += std::fabs(static_cast<double>(wd[i]) * ad[i]);
      }
      for (Isa isa : available_isas()) {
        const float got = kernels_at(type, isa).vec_dot(n, wq.data(), aq.data());
        const double slack = isa == Isa::scalar
                                 ? 0x1p-24 * std::fabs(expected) + 1e-12 * magnitude
                                 : (static_cast<double>(n) / 8 + 16) * 0x1p-24 * magnitude;
        EXPECT_NEAR(got, expected, slack)
            << ggml_type_name(type) << " n=" << n << " " << level(isa);
      }
    }
  }
}

// ---- edge cases -------------------------------------------------------------------------------

TEST(FloatEdge, ZerosAndSingleElements) {
  for (GgmlType type : kFloatTypes) {
    for (int64_t n : {1, 3, 40}) {
      const std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
      const std::vector<float> twos(static_cast<size_t>(n), 2.0f);
      const auto zq = convert(type, zeros), tq = convert(type, twos);
      for (Isa isa : available_isas()) {
        const TypeKernels k = kernels_at(type, isa);
        EXPECT_EQ(k.vec_dot(n, zq.data(), tq.data()), 0.0f) << ggml_type_name(type);
        EXPECT_EQ(k.vec_dot(n, tq.data(), tq.data()), 4.0f * n) << ggml_type_name(type);
      }
    }
  }
}

// Large values: F16 saturates to inf above 65504 (as a conversion must); the dot of large but
// representable values stays finite and accurate.
TEST(FloatEdge, LargeValues) {
  const auto x = test::random_floats(300, 8, 1e4f);
  for (GgmlType type : kFloatTypes) {
    const auto q = convert(type, x);
    const auto d = decode(type, q);
    double expected = 0;
    for (float v : d) expected += static_cast<double>(v) * v;
    for (Isa isa : available_isas()) {
      const float got = kernels_at(type, isa).vec_dot(300, q.data(), q.data());
      EXPECT_NEAR(got, expected, 2e-6 * expected) << ggml_type_name(type) << " " << level(isa);
    }
  }
}

// Unaligned rows (odd element offsets) of every length; conversions write exactly n elements.
TEST(FloatEdge, UnalignedRowsAndNoWritePastEnd) {
  for (GgmlType type : kFloatTypes) {
    const size_t eb = element_bytes(type);
    for (int64_t n : kLengths) {
      const auto x = test::random_floats(static_cast<size_t>(n), 90 + static_cast<uint32_t>(n));
      const auto q = convert(type, x);
      const auto ref_decoded = decode(type, q);
      std::vector<uint8_t> wbuf(q.size() + 3 * eb), abuf(q.size() + 3 * eb);
      std::memcpy(wbuf.data() + eb, q.data(), q.size());
      std::memcpy(abuf.data() + 3 * eb, q.data(), q.size());
      const float ref = kernels_at(type, Isa::scalar).vec_dot(n, q.data(), q.data());
      for (Isa isa : available_isas()) {
        SCOPED_TRACE(std::string(ggml_type_name(type)) + " n=" + std::to_string(n) + " " +
                     level(isa));
        const TypeKernels k = kernels_at(type, isa);
        EXPECT_NEAR(k.vec_dot(n, wbuf.data() + eb, abuf.data() + 3 * eb), ref, 1e-5 * ref);

        // Convert into the middle of a guarded buffer, at an odd element offset.
        std::vector<uint8_t> out(q.size() + 4 * eb, 0xa5);
        k.quantize_row(x.data(), out.data() + eb, n);
        EXPECT_EQ(std::memcmp(out.data() + eb, q.data(), q.size()), 0);
        for (size_t i = 0; i < eb; ++i) EXPECT_EQ(out[i], 0xa5);
        for (size_t i = eb + q.size(); i < out.size(); ++i) ASSERT_EQ(out[i], 0xa5) << i;

        std::vector<float> back(static_cast<size_t>(n) + 3, -7.0f);
        k.dequantize_row(wbuf.data() + eb, back.data() + 1, n);
        EXPECT_EQ(back[0], -7.0f);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(back[static_cast<size_t>(i) + 1], ref_decoded[i]);
        EXPECT_EQ(back[static_cast<size_t>(n) + 1], -7.0f);
        EXPECT_EQ(back[static_cast<size_t>(n) + 2], -7.0f);
      }
    }
  }
}

}  // namespace
}  // namespace strata::quant
