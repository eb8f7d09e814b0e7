// The values half of attention over a Q8_0 cache in integers (ops/attention_q8_values.h): every
// instruction-set level computes the definition bit for bit (the AVX-512 kernel with VNNI's int16
// dot products, the loops in int32), for any number of positions, rows and skipped positions, and
// the result is the weighted sum of the dequantized values within the weights' int16 rounding.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "attention_kernel_levels.h"
#include "ops/attention_q8_values.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "util/fp16.h"

namespace strata::ops {
namespace {

constexpr int64_t kStride = 64;  // positions per chunk, as attention uses it

using Level = test_kv::KernelLevel<q8_values::Kernels>;

std::vector<Level> levels() {
  return test_kv::kernel_levels(q8_values::kernels_baseline, q8_values::kernels_avx2,
                                q8_values::kernels_avx2_loops, q8_values::kernels_avx512);
}

std::vector<quant::BlockQ8_0> value_rows(int64_t n, int64_t d, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::vector<float> x(static_cast<size_t>(n * d));
  for (auto& v : x) v = normal(rng);
  std::vector<quant::BlockQ8_0> rows(static_cast<size_t>(n * d / quant::kQK));
  const auto quantize = quant::traits(GgmlType::Q8_0).kernels.quantize_row;
  for (int64_t j = 0; j < n; ++j) quantize(x.data() + j * d, &rows[j * d / quant::kQK], d);
  return rows;
}

// Softmax-like weights: one 1, the others spread over many orders of magnitude.
std::vector<float> chunk_weights(int64_t n_rows, std::mt19937& rng) {
  std::uniform_real_distribution<float> exponent(-30.0f, 0.0f);
  std::vector<float> w(static_cast<size_t>(n_rows * kStride));
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t j = 0; j < kStride; ++j) w[r * kStride + j] = std::exp(exponent(rng) * (j % 3));
    w[r * kStride + static_cast<int64_t>(rng() % kStride)] = 1.0f;
  }
  return w;
}

// The definition, written out with the blocks as stored: acc_in + the chunk's contribution.
std::vector<float> defined(const std::vector<float>& weights, int64_t n_rows, int64_t begin,
                           int64_t end, const std::vector<quant::BlockQ8_0>& rows, int64_t d,
                           const std::vector<float>& acc_in, bool fused) {
  const int64_t n_blocks = d / quant::kQK;
  std::vector<float> acc = acc_in;
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t b = 0; b < n_blocks; ++b) {
      std::vector<float> w(static_cast<size_t>(end), 0.0f);
      float m = 0;
      for (int64_t j = begin; j < end; ++j) {
        w[j] = weights[r * kStride + j] * f16_to_f32(rows[j * n_blocks + b].d);
        m = std::max(m, std::fabs(w[j]));
      }
      const float inv = m > 0 ? 32767.0f / m : 0.0f;
      for (int64_t i = 0; i < quant::kQK; ++i) {
        int64_t isum = 0;
        for (int64_t j = begin; j < end; ++j)
          isum += static_cast<int64_t>(std::nearbyint(w[j] * inv)) * rows[j * n_blocks + b].qs[i];
        float& a = acc[r * d + b * quant::kQK + i];
        const float s = m / 32767.0f;
        a = fused ? std::fma(static_cast<float>(isum), s, a) : static_cast<float>(isum) * s + a;
      }
    }
  }
  return acc;
}

std::vector<float> run(const q8_values::Kernels& k, const std::vector<float>& weights,
                       int64_t n_rows, int64_t begin, int64_t end,
                       const std::vector<quant::BlockQ8_0>& rows, int64_t count, int64_t d,
                       const std::vector<float>& acc_in) {
  const int64_t n_blocks = d / quant::kQK;
  std::vector<const uint8_t*> row_ptrs;
  for (int64_t j = 0; j < count; ++j)
    row_ptrs.push_back(reinterpret_cast<const uint8_t*>(&rows[j * n_blocks]));
  std::vector<uint32_t> pairs(static_cast<size_t>(kStride / 2 * d), 0xdeadbeef);
  std::vector<float> value_scales(static_cast<size_t>(n_blocks * kStride), NAN);
  k.pairs(row_ptrs.data(), count, n_blocks, kStride, pairs.data(), value_scales.data());
  std::vector<uint32_t> q(static_cast<size_t>(n_rows * n_blocks * kStride / 2), 0xdeadbeef);
  std::vector<float> q_scales(static_cast<size_t>(n_rows * n_blocks), NAN);
  k.weights(weights.data(), n_rows, begin, end, value_scales.data(), n_blocks, kStride, q.data(),
            q_scales.data());
  std::vector<float> acc = acc_in;
  k.values(q.data(), q_scales.data(), n_rows, pairs.data(), begin / 2, (end + 1) / 2, n_blocks,
           kStride, acc.data());
  return acc;
}

TEST(Q8AttentionValues, EveryLevelComputesTheIntegerDefinitionBitForBit) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  for (const int64_t d : {32, 64, 96, 128, 256}) {
    for (const int64_t count : {1, 2, 15, 37, 64}) {
      const std::vector<quant::BlockQ8_0> rows = value_rows(count, d, rng);
      const int64_t n_blocks = d / quant::kQK;
      for (const int64_t n_rows : {1, 2, 3, 4, 6}) {
        for (const int64_t begin : {int64_t{0}, std::min<int64_t>(3, count - 1)}) {
          SCOPED_TRACE(testing::Message() << "d " << d << ", positions " << count << ", rows "
                                          << n_rows << ", from " << begin);
          const std::vector<float> weights = chunk_weights(n_rows, rng);
          std::vector<float> acc_in(static_cast<size_t>(n_rows * d));
          for (auto& a : acc_in) a = normal(rng);
          for (const Level& level : levels()) {
            SCOPED_TRACE(level.name);
            const std::vector<float> got =
                run(level.kernels, weights, n_rows, begin, count, rows, count, d, acc_in);
            const std::vector<float> want =
                defined(weights, n_rows, begin, count, rows, d, acc_in, level.fused);
            ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
            // ... which is the weighted sum of the dequantized values, each weight within
            // 2^-16 of its block's largest (and float rounding).
            for (int64_t r = 0; r < n_rows; ++r) {
              for (int64_t i = 0; i < d; ++i) {
                const int64_t b = i / quant::kQK, c = i % quant::kQK;
                double exact = acc_in[r * d + i], bound = 0, largest = 0;
                for (int64_t j = begin; j < count; ++j) {
                  const double w =
                      double{weights[r * kStride + j]} * f16_to_f32(rows[j * n_blocks + b].d);
                  largest = std::max(largest, std::fabs(w));
                }
                for (int64_t j = begin; j < count; ++j) {
                  const quant::BlockQ8_0& block = rows[j * n_blocks + b];
                  const double w = double{weights[r * kStride + j]} * f16_to_f32(block.d);
                  exact += w * block.qs[c];
                  bound += (largest / 65534 + 1e-7 * std::fabs(w)) * std::abs(block.qs[c]);
                }
                bound += 1e-6 * std::fabs(exact);
                ASSERT_NEAR(got[r * d + i], exact, bound) << "row " << r << " dimension " << i;
              }
            }
          }
        }
      }
    }
  }
}

// The largest sums a chunk can make (every weight 32767, every code -128 or 127, 64 positions)
// stay exact in int32 on every level; weights of 0 everywhere leave the accumulator as it was.
TEST(Q8AttentionValues, ExtremeCodesAndZeroWeightsStayExact) {
  const int64_t d = 128, n_blocks = d / quant::kQK;
  std::mt19937 rng(3);
  for (const bool mixed : {false, true}) {
    std::vector<quant::BlockQ8_0> rows(static_cast<size_t>(kStride * n_blocks));
    for (auto& b : rows) {
      b.d = f32_to_f16(0.5f);
      for (auto& c : b.qs) c = static_cast<int8_t>(mixed && rng() % 2 ? 127 : -128);
    }
    const std::vector<float> ones(static_cast<size_t>(4 * kStride), 1.0f);
    const std::vector<float> acc_in(static_cast<size_t>(4 * d), 0.25f);
    for (const Level& level : levels()) {
      SCOPED_TRACE(testing::Message() << level.name << (mixed ? " mixed" : " all -128"));
      const std::vector<float> got =
          run(level.kernels, ones, 4, 0, kStride, rows, kStride, d, acc_in);
      ASSERT_EQ(got, defined(ones, 4, 0, kStride, rows, d, acc_in, level.fused));
      if (!mixed) {
        for (float a : got) ASSERT_NEAR(a, 0.25f + 64 * -128 * 0.5f, 1e-3f);
      }
      const std::vector<float> zeros(ones.size(), 0.0f);
      ASSERT_EQ(run(level.kernels, zeros, 4, 0, kStride, rows, kStride, d, acc_in), acc_in);
    }
  }
}

}  // namespace
}  // namespace strata::ops
