// Numeric kernels against straightforward double-precision references.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kv_test_cache.h"
#include "ops/activations.h"
#include "ops/argmax.h"
#include "ops/attention.h"
#include "ops/matmul.h"
#include "ops/moe_routing.h"
#include "ops/rms_norm.h"
#include "ops/rope.h"
#include "quant/quant.h"
#include "support/test_support.h"
#include "util/thread_pool.h"

namespace strata::ops {
namespace {

TEST(RmsNorm, MatchesDefinition) {
  const auto x = test::random_floats(300, 1, 3.0f);
  const auto w = test::random_floats(300, 2);
  std::vector<float> out(300);
  rms_norm(x.data(), w.data(), out.data(), 300, 1e-6f);
  double ms = 0;
  for (float v : x) ms += double(v) * v;
  const double scale = 1.0 / std::sqrt(ms / 300 + 1e-6);
  for (int i = 0; i < 300; ++i)
    EXPECT_NEAR(out[i], x[i] * scale * w[i], 1e-5 * std::fabs(x[i] * scale * w[i]) + 1e-6);
  // In place, without weights: unit root-mean-square.
  std::vector<float> y = x;
  rms_norm(y.data(), nullptr, y.data(), 300, 0.0f);
  double rms = 0;
  for (float v : y) rms += double(v) * v;
  EXPECT_NEAR(std::sqrt(rms / 300), 1.0, 1e-5);
}

// Rows normed together (their sums side by side) give each row's bits alone, and those are the
// GGUF engines' order written out here: float squares summed in double in index order, the scale
// in float. In place and out of place, with and without weights, any row count.
TEST(RmsNorm, RowsTogetherGiveEachRowsBitsInTheGgufOrder) {
  for (int64_t n : {1, 7, 64, 300}) {
    for (int64_t rows : {1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 24, 31, 33, 40}) {
      SCOPED_TRACE("n " + std::to_string(n) + " rows " + std::to_string(rows));
      const auto x = test::random_floats(static_cast<size_t>(rows * n), 5, 4.0f);
      const auto w = test::random_floats(static_cast<size_t>(n), 6);
      for (const float* weight : {w.data(), static_cast<const float*>(nullptr)}) {
        std::vector<float> expected(x.size());
        for (int64_t r = 0; r < rows; ++r) {
          double sum = 0;
          for (int64_t i = 0; i < n; ++i) {
            const float v = x[static_cast<size_t>(r * n + i)];
            sum += static_cast<double>(v * v);
          }
          const float scale =
              1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + 1e-6f);
          for (int64_t i = 0; i < n; ++i) {
            const float v = x[static_cast<size_t>(r * n + i)] * scale;
            expected[static_cast<size_t>(r * n + i)] = weight ? v * weight[i] : v;
          }
        }
        std::vector<float> out(x.size()), in_place = x;
        rms_norm_rows(x.data(), weight, out.data(), rows, n, 1e-6f);
        rms_norm_rows(in_place.data(), weight, in_place.data(), rows, n, 1e-6f);
        EXPECT_EQ(0, std::memcmp(out.data(), expected.data(), out.size() * sizeof(float)));
        EXPECT_EQ(0, std::memcmp(in_place.data(), expected.data(), out.size() * sizeof(float)));
        std::vector<float> alone(static_cast<size_t>(n));
        rms_norm(x.data() + (rows - 1) * n, weight, alone.data(), n, 1e-6f);
        EXPECT_EQ(0, std::memcmp(alone.data(), expected.data() + (rows - 1) * n,
                                 alone.size() * sizeof(float)));
      }
    }
  }
}

TEST(Rope, RotatesThePairsOfEachStyle) {
  const int64_t d = 8;
  const float base = 10000.0f;
  for (RopeStyle style : {RopeStyle::norm, RopeStyle::neox}) {
    Rope rope(style, d, d, base);
    auto x = test::random_floats(d, 3);
    auto y = x;
    rope.apply(y.data(), 0);
    for (int i = 0; i < d; ++i) EXPECT_FLOAT_EQ(y[i], x[i]);  // position 0: identity
    y = x;
    rope.apply(y.data(), 5);
    for (int i = 0; i < d / 2; ++i) {
      const int a = style == RopeStyle::neox ? i : 2 * i;
      const int b = style == RopeStyle::neox ? i + d / 2 : 2 * i + 1;
      const double angle = 5.0 * std::pow(double(base), -2.0 * i / d);
      EXPECT_NEAR(y[a], x[a] * std::cos(angle) - x[b] * std::sin(angle), 1e-5);
      EXPECT_NEAR(y[b], x[a] * std::sin(angle) + x[b] * std::cos(angle), 1e-5);
    }
  }
}

TEST(Rope, PartialRotationLeavesTheRest) {
  Rope rope(RopeStyle::neox, 16, 4, 1e6f);
  auto x = test::random_floats(16, 4);
  auto y = x;
  rope.apply(y.data(), 100);
  for (int i = 4; i < 16; ++i) EXPECT_EQ(y[i], x[i]);
  EXPECT_NE(y[0], x[0]);
  EXPECT_THROW(Rope(RopeStyle::neox, 16, 3, 1e4f), std::exception);
}

// A position's angles computed once (a step's first layer) and used by later rotations give the
// bits of a rotation that computes them itself, for both styles, partial rotation and YaRN.
TEST(Rope, AnglesComputedOnceGiveTheSameBits) {
  const int64_t d = 64, n_heads = 3;
  for (RopeStyle style : {RopeStyle::norm, RopeStyle::neox}) {
    for (const int64_t n_rot : {int64_t{64}, int64_t{32}}) {
      for (const float factor : {0.0f, 32.0f}) {
        Rope rope(style, d, n_rot, 1e6f, YarnScaling{factor, 4096});
        std::vector<float> cos_sin(static_cast<size_t>(n_rot));
        for (const int64_t pos : {int64_t{0}, int64_t{1}, int64_t{777}, int64_t{131071}}) {
          const auto x = test::random_floats(static_cast<size_t>(n_heads * d),
                                             static_cast<uint32_t>(pos) + 11);
          auto itself = x, shared = x;
          rope.apply_heads(itself.data(), n_heads, pos);
          rope.angles(pos, cos_sin.data());
          rope.apply_heads(shared.data(), n_heads, cos_sin.data());
          ASSERT_EQ(0, std::memcmp(itself.data(), shared.data(), x.size() * sizeof(float)))
              << "pos " << pos << " n_rot " << n_rot << " factor " << factor;
        }
      }
    }
  }
}

// Several heads at one position (their angles computed once): every head rotated by the formula,
// the dimensions past n_rot left alone.
TEST(Rope, HeadsTogetherEachRotatedByTheFormula) {
  const int64_t d = 16, n_rot = 12, n_heads = 3, pos = 777;
  const double base = 1e6;
  for (RopeStyle style : {RopeStyle::norm, RopeStyle::neox}) {
    Rope rope(style, d, n_rot, static_cast<float>(base));
    const auto x = test::random_floats(n_heads * d, 5);
    auto y = x;
    rope.apply_heads(y.data(), n_heads, pos);
    for (int64_t h = 0; h < n_heads; ++h) {
      const auto at = [&](const std::vector<float>& v, int64_t i) {
        return v[static_cast<size_t>(h * d + i)];
      };
      for (int64_t i = 0; i < n_rot / 2; ++i) {
        const int64_t a = style == RopeStyle::neox ? i : 2 * i;
        const int64_t b = style == RopeStyle::neox ? i + n_rot / 2 : 2 * i + 1;
        const double angle = pos * std::pow(base, -2.0 * i / n_rot);
        EXPECT_NEAR(at(y, a), at(x, a) * std::cos(angle) - at(x, b) * std::sin(angle), 1e-4);
        EXPECT_NEAR(at(y, b), at(x, a) * std::sin(angle) + at(x, b) * std::cos(angle), 1e-4);
      }
      for (int64_t i = n_rot; i < d; ++i) EXPECT_EQ(at(y, i), at(x, i));
    }
  }
}

// YaRN as gpt-oss uses it (head 64, base 150000, factor 32 over an original 4096 context),
// against the formula written out in doubles: corners lo = floor(c(32)) and hi = ceil(c(1)) with
// c(b) = 64 ln(4096 / (2 pi b)) / (2 ln 150000), a linear ramp from extrapolated to interpolated
// angles between them, and cos/sin scaled by 1 + 0.1 ln 32.
TEST(Rope, YarnBlendsAnglesAndScalesMagnitude) {
  const int64_t d = 64;
  const double base = 150000, factor = 32;
  const auto corner = [&](double b) {
    return d * std::log(4096 / (2 * M_PI * b)) / (2 * std::log(base));
  };
  const double lo = std::floor(corner(32)), hi = std::ceil(corner(1));
  EXPECT_EQ(lo, 8);
  EXPECT_EQ(hi, 18);
  Rope rope(RopeStyle::neox, d, d, static_cast<float>(base), YarnScaling{32.0f, 4096, 32.0f, 1.0f});
  const double magnitude = 1 + 0.1 * std::log(factor);
  const auto x = test::random_floats(d, 7);
  for (int64_t pos : {0, 1, 17, 300}) {
    auto y = x;
    rope.apply(y.data(), pos);
    for (int64_t i = 0; i < d / 2; ++i) {
      const double extrap = pos * std::pow(base, -2.0 * i / d), interp = extrap / factor;
      const double ramp = 1 - std::clamp((i - lo) / std::max(0.001, hi - lo), 0.0, 1.0);
      const double theta = interp * (1 - ramp) + extrap * ramp;
      const double c = std::cos(theta) * magnitude, sn = std::sin(theta) * magnitude;
      const double a = x[static_cast<size_t>(i)], b = x[static_cast<size_t>(i + d / 2)];
      EXPECT_NEAR(y[static_cast<size_t>(i)], a * c - b * sn, 1e-4) << "pos " << pos << " i " << i;
      EXPECT_NEAR(y[static_cast<size_t>(i + d / 2)], a * sn + b * c, 1e-4)
          << "pos " << pos << " i " << i;
    }
  }
  EXPECT_THROW(Rope(RopeStyle::neox, d, d, 1e4f, YarnScaling{0.5f, 4096, 32, 1}), std::exception);
}

TEST(Activations, SwigluOaiClampsGateAboveAndUpBothWays) {
  const float gate[] = {-9.0f, -1.0f, 0.5f, 7.5f, 20.0f}, up[] = {-8.0f, 0.3f, 9.0f, -2.0f, 1.0f};
  float out[5];
  swiglu_oai(gate, up, out, 5, 1.702f, 7.0f);
  for (int i = 0; i < 5; ++i) {
    const double g = std::min<double>(gate[i], 7.0), u = std::clamp<double>(up[i], -7.0, 7.0);
    EXPECT_NEAR(out[i], g / (1 + std::exp(-1.702 * g)) * (u + 1), 1e-5) << i;
  }
  float same[1];
  const float g7 = 7.0f, um2 = -2.0f;
  swiglu_oai(&g7, &um2, same, 1, 1.702f, 7.0f);
  EXPECT_EQ(out[3], same[0]);  // a gate of 7.5 acts as 7
}

// GLM-4.5 routing: chosen by sigmoid score + correction bias, weighted by the unbiased scores.
TEST(MoeRouting, SigmoidChoosesWithBiasButWeighsWithout) {
  const float logits[] = {2.0f, 0.0f, 1.0f, -1.0f};
  const float bias[] = {-1.0f, 0.5f, 0.0f, 2.0f};
  int32_t experts[2];
  float weights[2];
  route_top_k_sigmoid(logits, bias, 4, 2, true, 2.5f, experts, weights);
  // Ranks: sigmoid + bias = 0.88 - 1, 0.5 + 0.5, 0.73, 0.27 + 2 -> experts 3 then 1.
  EXPECT_EQ(experts[0], 3);
  EXPECT_EQ(experts[1], 1);
  const double s3 = 1 / (1 + std::exp(1.0)), s1 = 0.5;
  EXPECT_NEAR(weights[0], 2.5 * s3 / (s3 + s1), 1e-6);
  EXPECT_NEAR(weights[1], 2.5 * s1 / (s3 + s1), 1e-6);
  route_top_k_sigmoid(logits, nullptr, 4, 2, false, 1.0f, experts, weights);
  EXPECT_EQ(experts[0], 0);
  EXPECT_EQ(experts[1], 2);
  EXPECT_NEAR(weights[0], 1 / (1 + std::exp(-2.0)), 1e-6);
  EXPECT_THROW(route_top_k_sigmoid(logits, bias, 4, 5, true, 1.0f, experts, weights),
               std::exception);
}

// The vector SwiGLU (exponential from a polynomial, not std::exp) is within a few float roundings
// of the exact value over the whole range of gates, and gives each value the same bits whatever
// call it is part of (a body vector or the tail): a verify step's rows equal the decode step's.
TEST(Activations, SwigluIsAccurateAndTheSameBitsInAnyCall) {
  std::vector<float> gate, up;
  for (int i = 0; i <= 400; ++i) {
    gate.push_back(-100.0f + 0.5f * static_cast<float>(i) + 0.01f * static_cast<float>(i % 7));
    up.push_back(0.25f + 0.1f * static_cast<float>(i % 11) - 0.6f * static_cast<float>(i % 2));
  }
  const auto n = static_cast<int64_t>(gate.size());
  std::vector<float> all(gate.size()), all_oai(gate.size());
  swiglu(gate.data(), up.data(), all.data(), n);
  swiglu_oai(gate.data(), up.data(), all_oai.data(), n, 1.702f, 7.0f);
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[static_cast<size_t>(i)], u = up[static_cast<size_t>(i)];
    const double want = g / (1 + std::exp(-g)) * u;
    EXPECT_NEAR(all[static_cast<size_t>(i)], want, 1e-6 * std::abs(want) + 1e-30) << "gate " << g;
    const double go = std::min(g, 7.0), uo = std::clamp(u, -7.0, 7.0);
    const double want_oai = go / (1 + std::exp(-1.702 * go)) * (uo + 1);
    // -alpha * g is rounded to float before the exponential (as std::exp(-alpha * g) would be):
    // a relative error of up to |alpha g| 2^-24, 5e-6 at the largest arguments.
    EXPECT_NEAR(all_oai[static_cast<size_t>(i)], want_oai, 1e-5 * std::abs(want_oai) + 1e-30);
  }
  // Every call length from 1 to 40 at every offset of a stretch: each value's bits as in `all`.
  for (int64_t len = 1; len <= 40; ++len) {
    for (int64_t at = 180; at + len <= 230; at += 7) {
      std::vector<float> part(static_cast<size_t>(len)), part_oai(part.size());
      swiglu(gate.data() + at, up.data() + at, part.data(), len);
      swiglu_oai(gate.data() + at, up.data() + at, part_oai.data(), len, 1.702f, 7.0f);
      ASSERT_EQ(0, std::memcmp(part.data(), all.data() + at, part.size() * sizeof(float)));
      ASSERT_EQ(0, std::memcmp(part_oai.data(), all_oai.data() + at, part.size() * sizeof(float)));
    }
  }
  // In place, as the experts call it.
  std::vector<float> in_place = gate;
  swiglu(in_place.data(), up.data(), in_place.data(), n);
  EXPECT_EQ(0, std::memcmp(in_place.data(), all.data(), all.size() * sizeof(float)));
}

// The vector argmax gives std::max_element's index: the first of tied maxima, wherever they lie
// (body or tail), NaNs never chosen unless first, -0 and +0 equal.
TEST(Argmax, GivesMaxElementsIndex) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> level(0, 9);
  for (int64_t n : {1, 2, 7, 8, 9, 31, 32, 33, 100, 4096, 4099}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> x(static_cast<size_t>(n));
      for (auto& v : x) v = static_cast<float>(level(rng)) - 5.0f;  // many ties
      if (trial % 4 == 1) x.back() = 100.0f;                        // the maximum in the tail
      if (trial % 4 == 2 && n > 3) x[static_cast<size_t>(n / 2)] = std::nanf("");
      if (trial % 4 == 3) {  // zeros of both signs
        std::fill(x.begin(), x.end(), -0.0f);
        x.back() = 0.0f;
      }
      SCOPED_TRACE(testing::Message() << "n " << n << " trial " << trial);
      EXPECT_EQ(argmax(x.data(), n), std::max_element(x.begin(), x.end()) - x.begin());
    }
  }
  const float nan_first[] = {std::nanf(""), 3.0f, 5.0f};
  EXPECT_EQ(argmax(nan_first, 3), 0);
  const float infinite[] = {-INFINITY, -INFINITY, 1.0f, INFINITY, INFINITY};
  EXPECT_EQ(argmax(infinite, 5), 3);
}

TEST(Activations, SwigluSoftmaxAxpy) {
  const float gate[] = {-2.0f, 0.0f, 3.0f}, up[] = {1.0f, 5.0f, -2.0f};
  float out[3];
  swiglu(gate, up, out, 3);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(out[i], gate[i] / (1 + std::exp(-gate[i])) * up[i], 1e-6);
  float p[] = {1000.0f, 1001.0f, 999.0f};  // large values: no overflow
  softmax(p, 3);
  EXPECT_NEAR(p[0] + p[1] + p[2], 1.0f, 1e-6);
  EXPECT_NEAR(p[1] / p[0], std::exp(1.0f), 1e-4);
  float y[] = {1, 1};
  const float x[] = {2, 3};
  axpy(0.5f, x, y, 2);
  EXPECT_EQ(y[0], 2.0f);
  EXPECT_EQ(y[1], 2.5f);
}

TEST(MoeRouting, TopKWithRenormalizedWeights) {
  const float logits[] = {0.1f, 2.0f, -1.0f, 1.5f, 2.0f};
  int32_t experts[3];
  float weights[3];
  route_top_k(logits, 5, 2, true, experts, weights);
  EXPECT_EQ(experts[0], 1);  // tie between 1 and 4: lower id first
  EXPECT_EQ(experts[1], 4);
  EXPECT_NEAR(weights[0], 0.5f, 1e-6);
  EXPECT_NEAR(weights[1], 0.5f, 1e-6);
  route_top_k(logits, 5, 3, false, experts, weights);
  double z = 0;
  for (float l : logits) z += std::exp(l);
  EXPECT_NEAR(weights[2], std::exp(1.5) / z, 1e-6);
  EXPECT_THROW(route_top_k(logits, 5, 6, true, experts, weights), std::exception);
}

// The choice against a sort of every expert (value down, id up), on logits with many ties and
// every k, for the expert counts of the supported models (16 to 512).
TEST(MoeRouting, TopKIsTheSortedBestWithTiesToTheLowerId) {
  std::mt19937 rng(34);
  for (const int64_t n : {16, 128, 512}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> logits(static_cast<size_t>(n));
      for (float& l : logits) l = static_cast<float>(static_cast<int>(rng() % 9)) * 0.25f;
      std::vector<int32_t> order(static_cast<size_t>(n));
      for (int32_t i = 0; i < static_cast<int32_t>(n); ++i) order[static_cast<size_t>(i)] = i;
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)];
      });
      for (const int64_t k : {int64_t{1}, int64_t{4}, int64_t{8}, int64_t{10}, n}) {
        std::vector<int32_t> experts(static_cast<size_t>(k));
        std::vector<float> weights(static_cast<size_t>(k));
        route_top_k(logits.data(), n, k, false, experts.data(), weights.data());
        EXPECT_TRUE(std::equal(experts.begin(), experts.end(), order.begin()))
            << "n " << n << " k " << k;
        route_top_k_sigmoid(logits.data(), nullptr, n, k, false, 1.0f, experts.data(),
                            weights.data());
        EXPECT_TRUE(std::equal(experts.begin(), experts.end(), order.begin()))
            << "sigmoid, n " << n << " k " << k;
      }
    }
  }
}

// The experts' outputs summed per token: tokens split across threads (many rows) or one loop
// (few) give the bits of the plain loop over the rows in order; a token without rows gets zeros.
TEST(MoeRouting, CombinedRowsAreTheLoopsBitsWhateverTheThreads) {
  ThreadPool pool(3);
  for (const int64_t n_tokens : {3, 97}) {  // 3 x 4 rows: one loop; 97 x 4: across the threads
    constexpr int64_t kEmbd = 768, kExperts = 4;
    SCOPED_TRACE(testing::Message() << n_tokens << " tokens");
    // Rows grouped by expert, each expert's tokens in a different order; token 1 has none.
    std::vector<int32_t> token_of;
    for (int64_t e = 0; e < kExperts; ++e) {
      for (int64_t i = 0; i < n_tokens; ++i) {
        const int64_t t = (i * 7 + e * 3) % n_tokens;
        if (t != 1) token_of.push_back(static_cast<int32_t>(t));
      }
    }
    const auto weight = test::random_floats(token_of.size(), 3);
    const auto rows = test::random_floats(token_of.size() * kEmbd, 4, 2.0f);
    std::vector<float> expected(static_cast<size_t>(n_tokens * kEmbd), 0.0f);
    for (size_t s = 0; s < token_of.size(); ++s)
      axpy(weight[s], rows.data() + s * kEmbd, expected.data() + token_of[s] * kEmbd, kEmbd);
    std::vector<float> out(expected.size(), 123.0f);
    combine_expert_rows(token_of, weight, rows.data(), n_tokens, kEmbd, out.data(), pool);
    EXPECT_EQ(std::memcmp(out.data(), expected.data(), out.size() * sizeof(float)), 0);
    EXPECT_EQ(out[kEmbd], 0.0f);
  }
}

TEST(Matmul, EqualsDotOfDequantizedRows) {
  ThreadPool pool(2);
  for (GgmlType type :
       {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
    SCOPED_TRACE(std::string(ggml_type_name(type)));
    const quant::TypeTraits& t = quant::traits(type);
    const int64_t cols = 512, rows = 37, tokens = 19;
    const auto wf = test::random_floats(cols * rows, 7);
    std::vector<uint8_t> wq(static_cast<size_t>(quant::row_bytes(type, cols) * rows));
    t.kernels.quantize_row(wf.data(), wq.data(), cols * rows);
    const WeightMatrix w{type, wq.data(), cols, rows, quant::row_bytes(type, cols)};
    const auto x = test::random_floats(cols * tokens, 8);
    QuantizedRows a;
    a.quantize(x.data(), tokens, cols, cols, t.activation_type);
    std::vector<float> out(static_cast<size_t>(tokens * rows));
    matmul(w, a, out.data(), rows, pool, {});
    // Reference: dequantize both sides and accumulate in double.
    std::vector<float> wd(static_cast<size_t>(cols)), ad(static_cast<size_t>(cols));
    const quant::TypeTraits& at = quant::traits(t.activation_type);
    for (int64_t tok = 0; tok < tokens; ++tok) {
      at.kernels.dequantize_row(a.row(tok), ad.data(), cols);
      for (int64_t r = 0; r < rows; ++r) {
        t.kernels.dequantize_row(w.row(r), wd.data(), cols);
        double ref = 0, mag = 0;
        for (int64_t i = 0; i < cols; ++i) {
          ref += double(wd[i]) * ad[i];
          mag += std::fabs(double(wd[i]) * ad[i]);
        }
        ASSERT_NEAR(out[tok * rows + r], ref, 1e-5 * mag + 1e-5) << "token " << tok << " row " << r;
      }
    }
  }
}

TEST(Matmul, RejectsMismatchedActivations) {
  ThreadPool pool(1);
  std::vector<uint8_t> wq(34 * 4);
  const WeightMatrix w{GgmlType::Q8_0, wq.data(), 128, 1, 136};
  const auto x = test::random_floats(128, 1);
  QuantizedRows a;
  a.quantize(x.data(), 1, 128, 128, GgmlType::F32);
  float out;
  EXPECT_THROW(matmul(w, a, &out, 1, pool, {}), std::exception);
}

// Attention over a cache vs an exact softmax in double over what the cache holds (keys and
// values as stored, the query rounded to the keys' partner format): isolates the online softmax
// from the storage rounding, which the oracle model tests cover.
void check_attention(GgmlType kv_type) {
  const int64_t heads = 2, d = 64, n = 150;  // spans several scoring chunks
  const int64_t row_bytes = quant::row_bytes(kv_type, d);
  std::vector<uint8_t> k(static_cast<size_t>(n * heads * row_bytes)), v(k.size());
  const KvLayerView kv{kv_type, k.data(), v.data(), heads, d, row_bytes};
  const auto keys = test::random_floats(n * heads * d, 11);
  const auto values = test::random_floats(n * heads * d, 12);
  for (int64_t pos = 0; pos < n; ++pos)
    kv_store(kv, pos, &keys[pos * heads * d], &values[pos * heads * d]);
  const quant::TypeTraits& t = quant::traits(kv_type);
  const quant::TypeTraits& qt = quant::traits(t.activation_type);
  auto q = test::random_floats(d, 13, 2.0f);
  std::vector<uint8_t> q_packed(static_cast<size_t>(quant::row_bytes(qt.type, d)));
  std::vector<float> q_stored(d), k_stored(d), v_stored(d);
  qt.kernels.quantize_row(q.data(), q_packed.data(), d);
  qt.kernels.dequantize_row(q_packed.data(), q_stored.data(), d);
  const float scale = 1.0f / 8.0f;
  for (int64_t head = 0; head < heads; ++head) {
    for (int64_t len : {1, 7, 64, 65, 150}) {
      std::vector<float> out(d);
      attend(kv, head, q.data(), len, scale, out.data());
      std::vector<double> s(static_cast<size_t>(len)), ref(static_cast<size_t>(d), 0.0);
      double max = -1e300, sum = 0;
      for (int64_t p = 0; p < len; ++p) {
        t.kernels.dequantize_row(kv.k_row(p, head), k_stored.data(), d);
        double dot = 0;
        for (int64_t i = 0; i < d; ++i) dot += double(q_stored[i]) * k_stored[i];
        s[p] = dot * scale;
        max = std::max(max, s[p]);
      }
      for (auto& x : s) sum += (x = std::exp(x - max));
      for (int64_t p = 0; p < len; ++p) {
        t.kernels.dequantize_row(kv.v_row(p, head), v_stored.data(), d);
        for (int64_t i = 0; i < d; ++i) ref[i] += s[p] / sum * v_stored[i];
      }
      for (int64_t i = 0; i < d; ++i) {
        ASSERT_NEAR(out[i], ref[i], test_kv::exact_attention_tolerance(kv_type))
            << "head " << head << " len " << len << " i " << i;
      }
    }
  }
}

TEST(Attention, F16CacheMatchesExactSoftmax) {
  check_attention(GgmlType::F16);
}

// A group of query heads sharing one KV head gives each head what attending alone gives, over
// more positions than one scoring chunk.
TEST(Attention, GroupEqualsHeadByHead) {
  for (GgmlType kv_type : {GgmlType::F16, GgmlType::Q8_0}) {
    const int64_t heads = 2, d = 64, n = 300, group = 6;
    const int64_t row_bytes = quant::row_bytes(kv_type, d);
    std::vector<uint8_t> k(static_cast<size_t>(n * heads * row_bytes)), v(k.size());
    const KvLayerView kv{kv_type, k.data(), v.data(), heads, d, row_bytes};
    const auto keys = test::random_floats(n * heads * d, 21);
    const auto values = test::random_floats(n * heads * d, 22);
    for (int64_t pos = 0; pos < n; ++pos)
      kv_store(kv, pos, &keys[pos * heads * d], &values[pos * heads * d]);
    const auto q = test::random_floats(group * d, 23, 1.5f);
    for (int64_t len : {1, 63, 64, 65, 300}) {
      std::vector<float> together(static_cast<size_t>(group * d)), alone(static_cast<size_t>(d));
      attend_group(kv, 1, q.data(), group, len, 0.125f, together.data());
      for (int64_t g = 0; g < group; ++g) {
        attend(kv, 1, q.data() + g * d, len, 0.125f, alone.data());
        for (int64_t i = 0; i < d; ++i) ASSERT_EQ(together[g * d + i], alone[i]) << g << " " << i;
      }
    }
  }
}
TEST(Attention, Q8CacheMatchesExactSoftmax) {
  check_attention(GgmlType::Q8_0);
}

}  // namespace
}  // namespace strata::ops
