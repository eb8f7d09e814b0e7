// Attention scores over Q8_0 keys in integers (ops/attention_q8.h): every instruction-set level
// computes the definition bit for bit (the AVX-512 VNNI kernel multiplies the codes in int8, the
// loops in int32), for any number of keys and query rows, and the result is the dot product of
// the dequantized query and key to float rounding.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "attention_kernel_levels.h"
#include "ops/attention_q8.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "util/fp16.h"

namespace strata::ops {
namespace {

constexpr int64_t kStride = 64;  // keys per chunk, as attention uses it

using Level = test_kv::KernelLevel<q8_scores::Kernels>;

std::vector<Level> levels() {
  return test_kv::kernel_levels(q8_scores::kernels_baseline, q8_scores::kernels_avx2,
                                q8_scores::kernels_avx2_loops, q8_scores::kernels_avx512);
}

std::vector<uint8_t> q8_0_rows(int64_t n, int64_t d, std::mt19937& rng, float spread) {
  std::normal_distribution<float> normal(0.0f, spread);
  std::vector<float> x(static_cast<size_t>(n * d));
  for (auto& v : x) v = normal(rng);
  const int64_t bytes = quant::row_bytes(GgmlType::Q8_0, d);
  std::vector<uint8_t> rows(static_cast<size_t>(n * bytes));
  const auto quantize = quant::traits(GgmlType::Q8_0).kernels.quantize_row;
  for (int64_t j = 0; j < n; ++j) quantize(x.data() + j * d, rows.data() + j * bytes, d);
  return rows;
}

// The definition, written out with the blocks as stored.
float defined_score(const quant::BlockQ8_0* q, const quant::BlockQ8_0* k, int64_t n_blocks,
                    float scale, bool fused) {
  float acc = 0;
  for (int64_t b = 0; b < n_blocks; ++b) {
    int32_t isum = 0;
    for (int i = 0; i < quant::kQK; ++i) isum += int32_t{q[b].qs[i]} * int32_t{k[b].qs[i]};
    const float prod = f16_to_f32(k[b].d) * f16_to_f32(q[b].d);
    acc = fused ? std::fma(static_cast<float>(isum), prod, acc)
                : static_cast<float>(isum) * prod + acc;
  }
  return acc * scale;
}

TEST(Q8AttentionScores, EveryLevelComputesTheIntegerDefinitionBitForBit) {
  std::mt19937 rng(5);
  const float scale = 0.0883883f;
  for (const int64_t d : {32, 64, 128, 96, 256}) {
    const int64_t n_blocks = d / quant::kQK, row_bytes = quant::row_bytes(GgmlType::Q8_0, d);
    for (const int64_t count : {1, 15, 16, 37, 64}) {
      const std::vector<uint8_t> keys = q8_0_rows(count, d, rng, 2.0f);
      std::vector<const uint8_t*> key_rows(static_cast<size_t>(count));
      for (int64_t j = 0; j < count; ++j) key_rows[static_cast<size_t>(j)] = &keys[j * row_bytes];
      for (const int64_t n_rows : {1, 2, 3, 4}) {
        SCOPED_TRACE(testing::Message() << "d " << d << ", keys " << count << ", rows " << n_rows);
        const std::vector<uint8_t> queries = q8_0_rows(n_rows, d, rng, 3.0f);
        std::vector<uint32_t> dwords(static_cast<size_t>(n_rows * d / 4));
        std::vector<float> q_scales(static_cast<size_t>(n_rows * n_blocks));
        std::vector<int32_t> offsets(q_scales.size());
        for (int64_t r = 0; r < n_rows; ++r) {
          q8_scores::prepare_query(&queries[r * row_bytes], n_blocks, &dwords[r * d / 4],
                                   &q_scales[r * n_blocks], &offsets[r * n_blocks]);
        }
        const q8_scores::QueryRows rows{dwords.data(), q_scales.data(), offsets.data()};
        const int64_t n_vectors = (count + 15) / 16;
        for (const Level& level : levels()) {
          SCOPED_TRACE(level.name);
          std::vector<uint32_t> laid(static_cast<size_t>(d / 4 * kStride), 0xdeadbeef);
          std::vector<float> key_scales(static_cast<size_t>(n_blocks * kStride), NAN);
          level.kernels.keys(key_rows.data(), count, n_blocks, kStride, laid.data(),
                             key_scales.data());
          std::vector<float> scores(static_cast<size_t>(4 * kStride), NAN);
          level.kernels.scores(rows, n_rows, laid.data(), key_scales.data(), n_vectors, n_blocks,
                               kStride, scale, scores.data());
          for (int64_t r = 0; r < n_rows; ++r) {
            const auto* q = reinterpret_cast<const quant::BlockQ8_0*>(&queries[r * row_bytes]);
            for (int64_t j = 0; j < n_vectors * 16; ++j) {
              const float got = scores[static_cast<size_t>(r * kStride + j)];
              if (j >= count) {  // padding keys score 0
                ASSERT_EQ(got, 0.0f) << "padding key " << j;
                continue;
              }
              const auto* k = reinterpret_cast<const quant::BlockQ8_0*>(&keys[j * row_bytes]);
              const float want = defined_score(q, k, n_blocks, scale, level.fused);
              ASSERT_EQ(std::memcmp(&got, &want, sizeof got), 0)
                  << "row " << r << " key " << j << ": " << got << " vs " << want;
              // ... which is the dot product of what the blocks hold, to float rounding.
              double exact = 0;
              for (int64_t b = 0; b < n_blocks; ++b)
                for (int i = 0; i < quant::kQK; ++i)
                  exact +=
                      double{f16_to_f32(q[b].d)} * q[b].qs[i] * f16_to_f32(k[b].d) * k[b].qs[i];
              ASSERT_NEAR(got, exact * scale, 1e-5 * (1 + std::fabs(exact * scale)));
            }
          }
        }
      }
    }
  }
}

// Codes at the ends of int8 (-128 x -128 pairs overflow vpmaddubsw's int16 sums, so no level may
// rely on it): every level still gives the definition exactly.
TEST(Q8AttentionScores, ExtremeCodesStayExact) {
  const int64_t d = 128, n_blocks = d / quant::kQK, count = 16;
  std::mt19937 rng(9);
  const auto extreme_blocks = [&](int64_t n, bool mixed) {
    std::vector<quant::BlockQ8_0> blocks(static_cast<size_t>(n * n_blocks));
    for (auto& b : blocks) {
      b.d = f32_to_f16(0.25f);
      for (auto& c : b.qs) c = static_cast<int8_t>(mixed && rng() % 2 ? 127 : -128);
    }
    return blocks;
  };
  for (const bool mixed : {false, true}) {
    const auto keys = extreme_blocks(count, mixed);
    const auto queries = extreme_blocks(4, mixed);
    std::vector<const uint8_t*> key_rows;
    for (int64_t j = 0; j < count; ++j)
      key_rows.push_back(
          reinterpret_cast<const uint8_t*>(&keys[static_cast<size_t>(j * n_blocks)]));
    std::vector<uint32_t> dwords(static_cast<size_t>(4 * d / 4));
    std::vector<float> q_scales(static_cast<size_t>(4 * n_blocks));
    std::vector<int32_t> offsets(q_scales.size());
    for (int64_t r = 0; r < 4; ++r)
      q8_scores::prepare_query(&queries[static_cast<size_t>(r * n_blocks)], n_blocks,
                               &dwords[r * d / 4], &q_scales[r * n_blocks], &offsets[r * n_blocks]);
    const q8_scores::QueryRows rows{dwords.data(), q_scales.data(), offsets.data()};
    for (const Level& level : levels()) {
      SCOPED_TRACE(testing::Message() << level.name << (mixed ? " mixed" : " all -128"));
      std::vector<uint32_t> laid(static_cast<size_t>(d / 4 * kStride));
      std::vector<float> key_scales(static_cast<size_t>(n_blocks * kStride));
      level.kernels.keys(key_rows.data(), count, n_blocks, kStride, laid.data(), key_scales.data());
      std::vector<float> scores(static_cast<size_t>(4 * kStride), NAN);
      level.kernels.scores(rows, 4, laid.data(), key_scales.data(), 1, n_blocks, kStride, 1.0f,
                           scores.data());
      for (int64_t r = 0; r < 4; ++r) {
        for (int64_t j = 0; j < count; ++j) {
          const float want =
              defined_score(&queries[static_cast<size_t>(r * n_blocks)],
                            &keys[static_cast<size_t>(j * n_blocks)], n_blocks, 1.0f, level.fused);
          ASSERT_EQ(scores[static_cast<size_t>(r * kStride + j)], want)
              << "row " << r << " key " << j;
        }
      }
    }
  }
}

}  // namespace
}  // namespace strata::ops
