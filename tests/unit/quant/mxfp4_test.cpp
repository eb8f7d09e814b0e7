// MXFP4: hand-built blocks decode to hand-computed values (the layout, independently of the
// quantizer, including the subnormal scales), the reference quantizer's error bound, tie rule and
// round trip, the faster levels' dot products against the scalar reference on odd sizes, and the
// bit-exact round trip of the MXFP4 tensors of a file written by another GGUF tool.

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "quant_test_helpers.h"
#include "support/test_support.h"

namespace strata::quant {
namespace {

using test_helpers::dequantize_all;
using test_helpers::quantize_ref;

constexpr int64_t kBlockBytes = 17;

uint8_t pattern(int i, int salt) {
  return static_cast<uint8_t>((i * 53 + salt * 71 + 5) ^ (i >> 2));
}

// Code q of element j of a block (independent of the kernels).
int code_of(const uint8_t* block, int j) {
  const uint8_t byte = block[1 + j % 16];
  return j < 16 ? byte & 15 : byte >> 4;
}

bool same_bits(float a, float b) {
  uint32_t x, y;
  std::memcpy(&x, &a, sizeof x);
  std::memcpy(&y, &b, sizeof y);
  return x == y;
}

// Every level that has its own dequantize kernel decodes the row to exactly `expected` (bit for
// bit: subnormal scales are within a few ulps of each other), from an aligned buffer and from an
// odd address.
void expect_decodes_exactly(const std::vector<uint8_t>& row, const std::vector<float>& expected) {
  const auto n = static_cast<int64_t>(expected.size());
  std::vector<uint8_t> shifted(row.size() + 1);
  std::memcpy(shifted.data() + 1, row.data(), row.size());
  for (Isa isa : available_isas()) {
    if (!kernels_exact(GgmlType::MXFP4, isa).dequantize_row) continue;
    for (const uint8_t* src : {row.data(), static_cast<const uint8_t*>(shifted.data() + 1)}) {
      const auto got = dequantize_all(GgmlType::MXFP4, src, n, isa);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_TRUE(same_bits(got[i], expected[i]))
            << isa_name(isa) << " element " << i << ": got " << got[i] << " expected "
            << expected[i] << (src == row.data() ? "" : " (odd address)");
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Layout.

TEST(Mxfp4Layout, BlockStruct) {
  EXPECT_EQ(sizeof(BlockMXFP4), 17u);
  EXPECT_EQ(offsetof(BlockMXFP4, e), 0u);
  EXPECT_EQ(offsetof(BlockMXFP4, qs), 1u);
  EXPECT_EQ(traits(GgmlType::MXFP4).block_elems, 32);
  EXPECT_EQ(traits(GgmlType::MXFP4).block_bytes, 17);
  EXPECT_EQ(traits(GgmlType::MXFP4).activation_type, GgmlType::Q8_0);
}

// value = kvalues[q] * 2^(e - 128), kvalues = twice the E2M1 values, code bit 3 the sign.
TEST(Mxfp4Layout, HandBuiltBlocksDecodeExactly) {
  const int kvalues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  // Normal, subnormal (e = 0, 1: 2^-128, 2^-127), smallest normal, large and the largest.
  const int exponents[] = {128, 0, 1, 2, 127, 131, 200, 252, 254, 255};
  constexpr int kBlocks = std::size(exponents);
  std::vector<uint8_t> row(kBlocks * kBlockBytes);
  std::vector<float> expected(kBlocks * 32);
  for (int b = 0; b < kBlocks; ++b) {
    uint8_t* p = row.data() + b * kBlockBytes;
    const int e = exponents[b];
    p[0] = static_cast<uint8_t>(e);
    for (int i = 0; i < 16; ++i) p[1 + i] = pattern(i, b);
    // Keep the values finite: 4 * 2^126 and 2 * 2^127 are already 2^128.
    if (e == 254) {
      for (int i = 0; i < 16; ++i) p[1 + i] &= 0xbb;  // codes 0..3 and 8..11
    } else if (e == 255) {
      for (int i = 0; i < 16; ++i) p[1 + i] &= 0x99;  // codes 0, 1, 8, 9
    }
    for (int j = 0; j < 32; ++j) {
      const int q = code_of(p, j);
      expected[32 * b + j] = std::ldexp(static_cast<float>(kvalues[q]), std::min(e, 255) - 128);
    }
  }
  // Hand-picked codes checked against literal values.
  row[1] = 0x7f;  // block 0 (e = 128, scale 1): element 0 = 12 * 1, element 16 = code 7 = 12
  expected[0] = -12.0f;
  expected[16] = 12.0f;
  row[kBlockBytes + 1] = 0x19;  // block 1 (e = 0): element 0 = -1 * 2^-128, element 16 = 2^-128
  expected[32] = -0x1p-128f;
  expected[48] = 0x1p-128f;
  row[2 * kBlockBytes + 1] = 0x07;  // block 2 (e = 1): element 0 = 12 * 2^-127, element 16 = 0
  expected[64] = 12 * 0x1p-127f;
  expected[80] = 0.0f;
  row[8 * kBlockBytes + 1] = 0x3b;  // block 8 (e = 254): -3 * 2^126 and 3 * 2^126
  expected[256] = -0x1.8p127f;
  expected[272] = 0x1.8p127f;
  row[9 * kBlockBytes + 1] = 0x91;  // block 9 (e = 255, decoded as 2^127): 2^127 and -2^127
  expected[288] = 0x1p127f;
  expected[304] = -0x1p127f;
  ASSERT_TRUE(std::fpclassify(expected[32]) == FP_SUBNORMAL);
  expect_decodes_exactly(row, expected);
}

TEST(Mxfp4Layout, LargeCodesOverflowAtTheTopExponents) {
  // 12 * 2^126 is above FLT_MAX: the format can hold it, a float cannot (as in other engines).
  std::vector<uint8_t> row(kBlockBytes, 0);
  row[0] = 254;
  row[1] = 0xf7;  // element 0 = 12 * 2^126, element 16 = -12 * 2^126
  std::vector<float> expected(32, 0.0f);
  expected[0] = INFINITY;
  expected[16] = -INFINITY;
  expect_decodes_exactly(row, expected);
}

// ---------------------------------------------------------------------------------------------
// The reference quantizer.

// Error bound. The exponent puts amax / s in [8, 16) (s = 2^(e - 128)). An element with
// |x| / s <= 12 lands on the nearest magnitude of 0, 1, 2, 3, 4, 6, 8, 12: off by at most half
// the largest gap (12 - 8) / 2 = 2, so |err| <= 2 s <= amax / 4. One with |x| / s in (12, 16)
// saturates to 12: |err| = |x| - 12 s < |x| / 4 <= amax / 4. Hence |err| <= amax / 4 per block,
// approached as amax -> 16 s (saturation). Holds while amax >= 2^-125 (no clamping of e).
TEST(Mxfp4Quantize, ErrorBoundOnRandomData) {
  for (float scale : {1.0f, 1e-3f, 1e3f, 1e-30f, 1e30f}) {
    const int64_t n = 32 * 257;
    const auto x = test::random_floats(static_cast<size_t>(n), 99, scale);
    const auto q = quantize_ref(GgmlType::MXFP4, x);
    const auto y = dequantize_all(GgmlType::MXFP4, q.data(), n, Isa::scalar);
    double worst = 0;
    for (int64_t b = 0; b < n / 32; ++b) {
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
      for (int j = 0; j < 32; ++j) {
        const int64_t i = 32 * b + j;
        const float err = std::fabs(y[i] - x[i]);
        ASSERT_LE(err, 0.25f * amax) << "scale " << scale << " element " << i;
        worst = std::max(worst, static_cast<double>(err / amax));
      }
    }
    std::printf("  scale %g: nmse %.4g, worst |err| / amax %.3f\n", scale,
                test::nmse(y.data(), x.data(), x.size()), worst);
  }
}

// Blocks whose amax is below 2^-125 take the smallest exponent (e = 0, s = 2^-128): the values are
// then within half a gap of at most 2 of the grid, |err| <= 2^-128 (also for subnormal inputs).
TEST(Mxfp4Quantize, TinyBlocksUseTheSmallestScale) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(32 * 4);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = u(rng) * std::ldexp(1.0f, -126 - static_cast<int>(i / 32) * 8);
  const auto q = quantize_ref(GgmlType::MXFP4, x);
  const auto y = dequantize_all(GgmlType::MXFP4, q.data(), 32 * 4, Isa::scalar);
  for (int b = 0; b < 4; ++b) EXPECT_EQ(q[b * kBlockBytes], 0) << "block " << b;
  for (size_t i = 0; i < x.size(); ++i) ASSERT_LE(std::fabs(y[i] - x[i]), 0x1p-128f) << i;
}

TEST(Mxfp4Quantize, ExponentIsFloorLog2AmaxMinus2) {
  struct Case {
    float amax;
    int e;
  };
  const Case cases[] = {
      {8.0f, 128},  // 2^3 -> 3 - 2 + 127
      {15.999f, 128},
      {std::nextafter(8.0f, 0.0f), 127},  // exactly below 2^3 (a rounded log2f would say 3)
      {1.0f, 125},
      {0x1p-125f, 0},
      {0x1p-124f, 1},
      {0x1p-130f, 0},  // clamped
      {FLT_TRUE_MIN, 0},
      {FLT_MAX, 252},
      {0.0f, 0},
  };
  for (const Case& c : cases) {
    std::vector<float> x(32, 0.0f);
    x[5] = c.amax;
    x[20] = -c.amax / 3;
    const auto q = quantize_ref(GgmlType::MXFP4, x);
    EXPECT_EQ(q[0], c.e) << "amax " << c.amax;
    const auto y = dequantize_all(GgmlType::MXFP4, q.data(), 32, Isa::scalar);
    for (float v : y) EXPECT_TRUE(std::isfinite(v)) << "amax " << c.amax;
  }
  // All zeros: e = 0 and zero codes (no "negative zero" code 8 for -0.0).
  std::vector<float> zeros(32, 0.0f);
  zeros[3] = -0.0f;
  const auto q = quantize_ref(GgmlType::MXFP4, zeros);
  for (uint8_t byte : q) EXPECT_EQ(byte, 0);
}

// Nearest magnitude with ties to the smaller one (the first table entry in the other tools'
// search); the sign bit only for non-zero magnitudes.
TEST(Mxfp4Quantize, NearestCodeAndTies) {
  // amax = 15.5 -> e = 128, s = 1: x / s is x.
  const float x[32] = {15.5f,  0.5f,  1.5f,   2.5f,  3.5f,  5.0f,  7.0f,   10.0f,
                       -0.5f,  -1.5f, -2.5f,  -3.5f, -5.0f, -7.0f, -10.0f, -0.0f,
                       0.49f,  0.51f, -0.51f, 4.9f,  5.1f,  9.9f,  10.1f,  13.0f,
                       -13.0f, 1.0f,  -1.0f,  6.0f,  -8.0f, 2.75f, -0.25f, 11.0f};
  const int expected_codes[32] = {7, 0, 1, 2, 3, 4, 5, 6, 0,  9, 10, 11, 12, 13, 14, 0,
                                  0, 1, 9, 4, 5, 6, 7, 7, 15, 1, 9,  5,  14, 3,  0,  7};
  const auto q = quantize_ref(GgmlType::MXFP4, std::vector<float>(x, x + 32));
  EXPECT_EQ(q[0], 128);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(code_of(q.data(), j), expected_codes[j]) << "x " << x[j];
}

// Random blocks of codes and exponents. A block is canonical (what the quantizer writes) when it
// has no code 8 and its largest magnitude is 8 or 12; those come back byte for byte. The others
// come back value for value (code 8 as 0; a smaller largest magnitude as a smaller exponent with
// larger codes, so the bytes differ).
TEST(Mxfp4Quantize, RoundTripOfBlocks) {
  std::mt19937 rng(42);
  int canonical = 0, other = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::vector<uint8_t> block(kBlockBytes);
    block[0] = static_cast<uint8_t>(rng() % 253);          // 0..252: the values stay finite
    const int max_code = 1 + static_cast<int>(rng() % 7);  // largest magnitude code 1..7
    for (int i = 0; i < 16; ++i) {
      const int lo = static_cast<int>(rng() % (max_code + 1)) | static_cast<int>(rng() % 2) * 8;
      const int hi = static_cast<int>(rng() % (max_code + 1)) | static_cast<int>(rng() % 2) * 8;
      block[1 + i] = static_cast<uint8_t>(lo | hi << 4);
    }
    const auto values = dequantize_all(GgmlType::MXFP4, block.data(), 32, Isa::scalar);
    const auto again = quantize_ref(GgmlType::MXFP4, values);
    const auto back = dequantize_all(GgmlType::MXFP4, again.data(), 32, Isa::scalar);
    for (int j = 0; j < 32; ++j) ASSERT_EQ(back[j], values[j]) << "trial " << trial << " j " << j;
    bool has_code8 = false;
    int largest = 0;
    for (int j = 0; j < 32; ++j) {
      has_code8 = has_code8 || code_of(block.data(), j) == 8;
      largest = std::max(largest, code_of(block.data(), j) & 7);
    }
    if (!has_code8 && largest >= 6) {
      ++canonical;
      ASSERT_EQ(again, block) << "trial " << trial;
    } else {
      ++other;
    }
  }
  EXPECT_GT(canonical, 100);
  EXPECT_GT(other, 100);
  // Quantizer output is canonical: quantize -> dequantize -> quantize gives the same bytes.
  for (float scale : {1.0f, 1e-20f, 1e20f}) {
    const auto x = test::random_floats(32 * 129, 3, scale);
    const auto q = quantize_ref(GgmlType::MXFP4, x);
    const auto y = dequantize_all(GgmlType::MXFP4, q.data(), 32 * 129, Isa::scalar);
    EXPECT_EQ(quantize_ref(GgmlType::MXFP4, y), q) << "scale " << scale;
  }
}

// ---------------------------------------------------------------------------------------------
// Dot products.

struct DotData {
  int64_t n;
  std::vector<float> w, a;           // the dequantized rows
  std::vector<uint8_t> wq;           // weights at an odd address: wq.data() + 1
  std::vector<uint8_t> aq;           // kMaxMultiDot activation rows back to back from aq.data() + 1
  int64_t stride;                    // bytes of one activation row
  double magnitude(int row) const {  // sum |w_i a_i| of activation row `row`
    double m = 0;
    for (int64_t i = 0; i < n; ++i) m += std::fabs(static_cast<double>(w[i]) * a[row * n + i]);
    return m;
  }
  const uint8_t* weights() const { return wq.data() + 1; }
  const uint8_t* act(int row) const { return aq.data() + 1 + row * stride; }
};

DotData make_dot_data(int64_t n, uint32_t seed) {
  DotData d;
  d.n = n;
  const auto wq = quantize_ref(GgmlType::MXFP4, test::random_floats(static_cast<size_t>(n), seed));
  d.wq.assign(wq.size() + 1, 0);
  std::memcpy(d.wq.data() + 1, wq.data(), wq.size());
  d.w = dequantize_all(GgmlType::MXFP4, wq.data(), n, Isa::scalar);
  d.stride = row_bytes(GgmlType::Q8_0, n);
  d.aq.assign(static_cast<size_t>(d.stride * kMaxMultiDot + 1), 0);
  for (int j = 0; j < kMaxMultiDot; ++j) {
    const auto aq =
        quantize_ref(GgmlType::Q8_0, test::random_floats(static_cast<size_t>(n), seed * 7 + 1 + j));
    std::memcpy(d.aq.data() + 1 + j * d.stride, aq.data(), aq.size());
    const auto ad = dequantize_all(GgmlType::Q8_0, aq.data(), n, Isa::scalar);
    d.a.insert(d.a.end(), ad.begin(), ad.end());
  }
  return d;
}

// Tolerance between two float evaluations of the same dot product. Per block the integer sum is
// exact and the scale (f16 Q8_0 d times a power of two) too; the levels differ only in how the
// block terms are rounded and summed (scalar: one sum over the blocks; AVX2 / AVX-512: 8 or 16
// lanes, even and odd blocks apart, then a horizontal sum). Each evaluation is within
// gamma_k * sum |terms| of the exact value, with k <= blocks + 5 roundings on any path and
// sum |terms| <= sum |w_i a_i| (the dequantized products); two evaluations are within twice that.
double dot_tolerance(int64_t n, double magnitude) {
  const double u = std::ldexp(1.0, -24);
  return 2.0 * static_cast<double>(n / 32 + 5) * u * magnitude;
}

constexpr int64_t kOddSizes[] = {32, 96, 32 * 7, 32 * 33, 32 * 129};

TEST(Mxfp4Dot, ScalarMatchesDequantizedDot) {
  for (int64_t n : kOddSizes) {
    const DotData d = make_dot_data(n, 10 + static_cast<uint32_t>(n));
    const VecDotFn dot = kernels_exact(GgmlType::MXFP4, Isa::scalar).vec_dot;
    double exact = 0;
    for (int64_t i = 0; i < n; ++i) exact += static_cast<double>(d.w[i]) * d.a[i];
    // Half the two-evaluation tolerance: one float evaluation against the exact value.
    EXPECT_NEAR(dot(n, d.weights(), d.act(0)), exact, dot_tolerance(n, d.magnitude(0)) / 2)
        << "n " << n;
  }
}

TEST(Mxfp4Dot, LevelsMatchScalarOnOddSizes) {
  for (int64_t n : kOddSizes) {
    const DotData d = make_dot_data(n, 20 + static_cast<uint32_t>(n));
    const VecDotFn ref = kernels_exact(GgmlType::MXFP4, Isa::scalar).vec_dot;
    for (Isa isa : available_isas()) {
      const TypeKernels k = kernels_exact(GgmlType::MXFP4, isa);
      if (isa == Isa::scalar) continue;
      ASSERT_NE(k.vec_dot, nullptr) << isa_name(isa);
      ASSERT_NE(k.vec_dot_multi, nullptr) << isa_name(isa);
      for (int row = 0; row < kMaxMultiDot; ++row) {
        const float expected = ref(n, d.weights(), d.act(row));
        EXPECT_NEAR(k.vec_dot(n, d.weights(), d.act(row)), expected,
                    dot_tolerance(n, d.magnitude(row)))
            << isa_name(isa) << " n " << n << " row " << row;
      }
      // vec_dot_multi: each column bit-identical to the same level's vec_dot (the kernels are
      // one code path), hence also within the tolerance of the scalar reference.
      for (int n_act = 1; n_act <= kMaxMultiDot; ++n_act) {
        float out[kMaxMultiDot + 1];
        std::fill(std::begin(out), std::end(out), -1234.5f);
        k.vec_dot_multi(n, d.weights(), d.act(0), d.stride, n_act, out);
        EXPECT_EQ(out[n_act], -1234.5f) << "wrote past n_act " << n_act;
        for (int j = 0; j < n_act; ++j) {
          EXPECT_TRUE(same_bits(out[j], k.vec_dot(n, d.weights(), d.act(j))))
              << isa_name(isa) << " n " << n << " n_act " << n_act << " column " << j;
          EXPECT_NEAR(out[j], ref(n, d.weights(), d.act(j)), dot_tolerance(n, d.magnitude(j)))
              << isa_name(isa) << " n " << n << " n_act " << n_act << " column " << j;
        }
      }
    }
  }
}

// The extreme exponents: subnormal (e = 0, 1) and large (e = 252) scales give the same products
// at every level (the scale times the Q8_0 d is exact or equally rounded on every path).
TEST(Mxfp4Dot, ExtremeExponents) {
  for (int e : {0, 1, 2, 200, 230}) {  // 230: |w| up to 12 * 2^102, sums stay finite
    const int64_t n = 32 * 5;
    DotData d = make_dot_data(n, 300 + static_cast<uint32_t>(e));
    for (int64_t b = 0; b < n / 32; ++b) d.wq[1 + b * kBlockBytes] = static_cast<uint8_t>(e);
    d.w = dequantize_all(GgmlType::MXFP4, d.weights(), n, Isa::scalar);
    const float ref = kernels_exact(GgmlType::MXFP4, Isa::scalar).vec_dot(n, d.weights(), d.act(0));
    EXPECT_TRUE(std::isfinite(ref)) << "e " << e;
    for (Isa isa : available_isas()) {
      const float got = kernels_exact(GgmlType::MXFP4, isa).vec_dot(n, d.weights(), d.act(0));
      EXPECT_NEAR(got, ref, dot_tolerance(n, d.magnitude(0)) + 1e-43)
          << isa_name(isa) << " e " << e;
    }
  }
}

TEST(Mxfp4Dot, ZeroActivationsAndWeights) {
  const int64_t n = 32 * 3;
  const auto zero_w = quantize_ref(GgmlType::MXFP4, std::vector<float>(n, 0.0f));
  const auto zero_a = quantize_ref(GgmlType::Q8_0, std::vector<float>(n, 0.0f));
  const DotData d = make_dot_data(n, 9);
  for (Isa isa : available_isas()) {
    const VecDotFn dot = kernels_exact(GgmlType::MXFP4, isa).vec_dot;
    EXPECT_EQ(dot(n, zero_w.data(), d.act(0)), 0.0f) << isa_name(isa);
    EXPECT_EQ(dot(n, d.weights(), zero_a.data()), 0.0f) << isa_name(isa);
  }
}

// ---------------------------------------------------------------------------------------------
// A file written by another GGUF tool (file type MXFP4_MOE): its MXFP4 expert tensors
// decode and requantize to the same bytes with the reference quantizer, row by row (blocks that
// are not canonical would be allowed a value-exact round trip instead, and counted).

TEST(Mxfp4Oracle, RealFileRoundTripsBitExactly) {
  const auto path = test::oracle_dir() / "archs" / "models" / "tiny-gpt-oss-MXFP4_MOE.gguf";
  const GgufFile f = GgufFile::open(path.string());
  int tensors = 0;
  for (const auto& t : f.tensors()) {
    if (t.type != GgmlType::MXFP4) continue;
    ++tensors;
    SCOPED_TRACE(t.name);
    const int64_t row = t.row_length();
    const int64_t bytes = row_bytes(GgmlType::MXFP4, row);
    ASSERT_EQ(static_cast<int64_t>(t.data.size()), bytes * t.rows());
    int64_t blocks = 0, non_canonical = 0;
    for (int64_t r = 0; r < t.rows(); ++r) {
      const uint8_t* src = t.data.data() + r * bytes;
      const auto values = dequantize_all(GgmlType::MXFP4, src, row, Isa::scalar);
      for (float v : values) ASSERT_TRUE(std::isfinite(v)) << "row " << r;
      const auto again = quantize_ref(GgmlType::MXFP4, values);
      for (int64_t b = 0; b < row / 32; ++b, ++blocks) {
        if (std::memcmp(again.data() + b * kBlockBytes, src + b * kBlockBytes, kBlockBytes) == 0)
          continue;
        ++non_canonical;
        const auto back =
            dequantize_all(GgmlType::MXFP4, again.data() + b * kBlockBytes, 32, Isa::scalar);
        for (int j = 0; j < 32; ++j) {
          ASSERT_TRUE(same_bits(back[j], values[32 * b + j])) << "row " << r << " block " << b;
        }
      }
    }
    std::printf("  %s: %lld blocks, %lld not byte-identical after requantization\n", t.name.c_str(),
                static_cast<long long>(blocks), static_cast<long long>(non_canonical));
    EXPECT_EQ(non_canonical, 0);
    if (t.name == "blk.0.ffn_gate_exps.weight") {
      EXPECT_EQ(blocks, 256 / 32 * 64 * 8);
    }
  }
  EXPECT_EQ(tensors, 6);
  ASSERT_NE(f.find_tensor("blk.0.ffn_gate_exps.weight"), nullptr);
}

// The same tensor through the dispatched kernels: every level decodes it to the same floats, and
// the dot products of its rows agree with the scalar reference.
TEST(Mxfp4Oracle, RealTensorAtEveryLevel) {
  const auto path = test::oracle_dir() / "archs" / "models" / "tiny-gpt-oss-MXFP4_MOE.gguf";
  const GgufFile f = GgufFile::open(path.string());
  const GgufTensorInfo* t = f.find_tensor("blk.0.ffn_gate_exps.weight");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->type, GgmlType::MXFP4);
  const int64_t n = t->row_length();
  const int64_t bytes = row_bytes(GgmlType::MXFP4, n);
  const auto a = test::random_floats(static_cast<size_t>(n), 8);
  const auto aq = quantize_ref(GgmlType::Q8_0, a);
  const auto ad = dequantize_all(GgmlType::Q8_0, aq.data(), n, Isa::scalar);
  for (int64_t r = 0; r < t->rows(); r += 37) {
    const uint8_t* src = t->data.data() + r * bytes;
    const auto ref = dequantize_all(GgmlType::MXFP4, src, n, Isa::scalar);
    double magnitude = 0;
    for (int64_t i = 0; i < n; ++i) magnitude += std::fabs(static_cast<double>(ref[i]) * ad[i]);
    const float dot_ref = kernels_exact(GgmlType::MXFP4, Isa::scalar).vec_dot(n, src, aq.data());
    for (Isa isa : available_isas()) {
      const TypeKernels k = kernels_at(GgmlType::MXFP4, isa);
      std::vector<float> got(static_cast<size_t>(n));
      k.dequantize_row(src, got.data(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(same_bits(got[i], ref[i])) << isa_name(isa);
      EXPECT_NEAR(k.vec_dot(n, src, aq.data()), dot_ref, dot_tolerance(n, magnitude))
          << isa_name(isa) << " row " << r;
    }
  }
}

// The file's MXFP4 tensors were quantized from the F16 model beside it: the reference quantizer
// reproduces them byte for byte from the F16 values. This covers the exponent rule and the tie
// rule: these tensors hold ~190 elements each exactly halfway between two magnitudes (F16 values
// are coarse enough for that), and a tie rounded the other way would change a byte.
TEST(Mxfp4Oracle, QuantizingTheF16ModelReproducesTheFile) {
  const auto dir = test::oracle_dir() / "archs" / "models";
  const GgufFile q = GgufFile::open((dir / "tiny-gpt-oss-MXFP4_MOE.gguf").string());
  const GgufFile f16 = GgufFile::open((dir / "tiny-gpt-oss-F16.gguf").string());
  int tensors = 0;
  int64_t ties = 0;
  for (const auto& t : q.tensors()) {
    if (t.type != GgmlType::MXFP4) continue;
    ++tensors;
    SCOPED_TRACE(t.name);
    const GgufTensorInfo* src = f16.find_tensor(t.name);
    ASSERT_NE(src, nullptr);
    ASSERT_EQ(src->shape, t.shape);
    const int64_t row = src->row_length();
    const int64_t src_bytes = row_bytes(src->type, row);
    const int64_t bytes = row_bytes(GgmlType::MXFP4, row);
    std::vector<float> x(static_cast<size_t>(row));
    for (int64_t r = 0; r < src->rows(); ++r) {
      kernels_exact(src->type, Isa::scalar)
          .dequantize_row(src->data.data() + r * src_bytes, x.data(), row);
      const auto mine = quantize_ref(GgmlType::MXFP4, x);
      ASSERT_EQ(std::memcmp(mine.data(), t.data.data() + r * bytes, static_cast<size_t>(bytes)), 0)
          << "row " << r;
      for (int64_t b = 0; b < row / 32; ++b) {
        const int e = mine[static_cast<size_t>(b * kBlockBytes)];
        for (int j = 0; j < 32; ++j) {
          const float m = std::ldexp(std::fabs(x[static_cast<size_t>(32 * b + j)]), 128 - e);
          for (float mid : {0.5f, 1.5f, 2.5f, 3.5f, 5.0f, 7.0f, 10.0f}) ties += m == mid ? 1 : 0;
        }
      }
    }
  }
  EXPECT_EQ(tensors, 6);
  std::printf("  6 tensors reproduced; %lld elements were ties\n", static_cast<long long>(ties));
  EXPECT_GT(ties, 0);
}

}  // namespace
}  // namespace strata::quant
