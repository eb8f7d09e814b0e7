// attend_block (a block of query tokens of one sequence sharing each decoded chunk of keys and
// values) gives every token exactly, bit for bit, what attend_group gives it alone: whatever the
// other tokens of the block, their causal limits, the cache type, the page layout, the head size
// and the group size.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kv_test_cache.h"
#include "ops/attention.h"
#include "quant/quant.h"
#include "support/test_support.h"

namespace strata::ops {
namespace {

using test_kv::Cache;

// A cache of n random positions, contiguous (page_size 0) or in shuffled pages of page_size.
Cache make_cache(GgmlType type, int64_t heads, int64_t d, int64_t n, int64_t page_size,
                 uint32_t seed) {
  Cache c = test_kv::make_cache(type, heads, d, n, page_size, seed);
  test_kv::store_random(c.view, n, seed + 1);
  return c;
}

// Runs attend_block over `lengths` (one token each) with the model's layout (several KV heads'
// groups interleaved in a token's row) and checks every token against attend_group alone.
void expect_block_equals_tokens(const KvLayerView& kv, int64_t kv_head, int64_t group,
                                const std::vector<int64_t>& lengths, uint32_t seed) {
  const int64_t d = kv.head_dim, n_tokens = static_cast<int64_t>(lengths.size());
  const int64_t row = kv.n_kv_heads * group * d;  // q_stride and out_stride
  const auto q = test::random_floats(static_cast<size_t>(n_tokens * row), seed, 1.5f);
  std::vector<float> block(static_cast<size_t>(n_tokens * row), -7.0f);
  attend_block(kv, kv_head, q.data() + kv_head * group * d, row, group, n_tokens, lengths.data(),
               0.125f, block.data() + kv_head * group * d, row);
  std::vector<float> alone(static_cast<size_t>(group * d));
  for (int64_t t = 0; t < n_tokens; ++t) {
    attend_group(kv, kv_head, q.data() + t * row + kv_head * group * d, group,
                 lengths[static_cast<size_t>(t)], 0.125f, alone.data());
    const float* got = block.data() + t * row + kv_head * group * d;
    ASSERT_EQ(std::memcmp(got, alone.data(), alone.size() * sizeof(float)), 0)
        << "token " << t << " of " << n_tokens << ", length " << lengths[static_cast<size_t>(t)];
  }
  // Nothing outside the block's rows for this KV head was written.
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t i = 0; i < row; ++i) {
      if (i >= kv_head * group * d && i < (kv_head + 1) * group * d) continue;
      ASSERT_EQ(block[static_cast<size_t>(t * row + i)], -7.0f);
    }
  }
}

struct Shape {
  GgmlType type;
  int64_t d;
};

TEST(BlockAttention, EqualsTokenByTokenForEveryShape) {
  const int64_t heads = 2, n = 203;
  // Prefill-like blocks (consecutive positions, across chunk boundaries and ragged ends) and
  // arbitrary ones (out of order, repeated, one position).
  const std::vector<std::vector<int64_t>> blocks = {
      {1},
      {1, 2, 3, 4, 5, 6, 7},
      {60, 61, 62, 63, 64, 65, 66, 67, 68},
      {121, 122, 123, 124, 125, 126, 127, 128, 129, 130, 131, 132, 133, 134, 135, 136, 137},
      {203, 1, 64, 65, 17, 203, 128, 129},
  };
  for (const Shape shape :
       {Shape{GgmlType::F16, 64}, Shape{GgmlType::F16, 128}, Shape{GgmlType::F16, 256},
        Shape{GgmlType::F16, 40}, Shape{GgmlType::F16, 24}, Shape{GgmlType::Q8_0, 64},
        Shape{GgmlType::Q8_0, 128}, Shape{GgmlType::Q8_0, 256}, Shape{GgmlType::Q8_0, 96}}) {
    for (int64_t page_size : {0, 16, 48}) {
      const Cache c = make_cache(shape.type, heads, shape.d, n, page_size, 11);
      for (int64_t group = 1; group <= 8; ++group) {
        SCOPED_TRACE(testing::Message() << ggml_type_name(shape.type) << " d " << shape.d
                                        << " page " << page_size << " group " << group);
        for (size_t b = 0; b < blocks.size(); ++b) {
          expect_block_equals_tokens(c.view, group % heads, group, blocks[b],
                                     static_cast<uint32_t>(100 + b));
        }
      }
    }
  }
}

// A token sees positions [0, length) and nothing after: the positions past its limit may hold
// anything (here NaN rows, as in an unwritten cache slot) while the block decodes them for
// its longer tokens. The long token's own output is NaN; the short ones' are untouched.
TEST(BlockAttention, TokensNeverSeePastTheirLimit) {
  const int64_t heads = 1, d = 128, n = 150, group = 8;
  for (GgmlType type : {GgmlType::F16, GgmlType::Q8_0}) {
    for (int64_t limit : {1, 15, 16, 17, 63, 64, 65, 100}) {
      SCOPED_TRACE(testing::Message() << ggml_type_name(type) << " limit " << limit);
      Cache clean = make_cache(type, heads, d, n, 0, 5);
      Cache dirty = make_cache(type, heads, d, n, 0, 5);
      const int64_t row_bytes = dirty.view.head_row_bytes;
      std::fill(dirty.k.begin() + limit * row_bytes, dirty.k.end(), uint8_t{0xff});
      std::fill(dirty.v.begin() + limit * row_bytes, dirty.v.end(), uint8_t{0xff});
      const std::vector<int64_t> lengths = {limit, std::max<int64_t>(1, limit - 3), n};
      const int64_t row = group * d;
      const auto q = test::random_floats(static_cast<size_t>(3 * row), 9, 1.5f);
      std::vector<float> want(static_cast<size_t>(3 * row)), got(want.size());
      attend_block(clean.view, 0, q.data(), row, group, 3, lengths.data(), 0.1f, want.data(), row);
      attend_block(dirty.view, 0, q.data(), row, group, 3, lengths.data(), 0.1f, got.data(), row);
      for (int64_t i = 0; i < 2 * row; ++i) {
        ASSERT_EQ(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)]) << i;
        ASSERT_TRUE(std::isfinite(got[static_cast<size_t>(i)])) << i;
      }
      EXPECT_TRUE(std::isnan(got[static_cast<size_t>(2 * row)]));
    }
  }
}

// The block result is the softmax-weighted average the definition asks for (tolerance: the
// rounding of f16 queries and keys is applied to the reference too).
TEST(BlockAttention, MatchesExactSoftmax) {
  const int64_t heads = 1, d = 64, n = 130, group = 3;
  const Cache c = make_cache(GgmlType::F16, heads, d, n, 0, 21);
  const std::vector<int64_t> lengths = {1, 64, 65, 130};
  const int64_t row = group * d, n_tokens = static_cast<int64_t>(lengths.size());
  const auto q = test::random_floats(static_cast<size_t>(n_tokens * row), 22, 1.5f);
  std::vector<float> out(static_cast<size_t>(n_tokens * row));
  attend_block(c.view, 0, q.data(), row, group, n_tokens, lengths.data(), 0.125f, out.data(), row);
  const quant::TypeTraits& f16 = quant::traits(GgmlType::F16);
  std::vector<uint8_t> packed(static_cast<size_t>(2 * d));
  std::vector<float> qr(d), kr(d), vr(d);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t g = 0; g < group; ++g) {
      f16.kernels.quantize_row(&q[static_cast<size_t>(t * row + g * d)], packed.data(), d);
      f16.kernels.dequantize_row(packed.data(), qr.data(), d);
      const int64_t len = lengths[static_cast<size_t>(t)];
      std::vector<double> s(static_cast<size_t>(len)), ref(static_cast<size_t>(d), 0.0);
      double max = -1e300, sum = 0;
      for (int64_t p = 0; p < len; ++p) {
        f16.kernels.dequantize_row(c.view.k_row(p, 0), kr.data(), d);
        double dot = 0;
        for (int64_t i = 0; i < d; ++i) dot += double(qr[i]) * kr[i];
        s[static_cast<size_t>(p)] = dot * 0.125;
        max = std::max(max, s[static_cast<size_t>(p)]);
      }
      for (auto& x : s) sum += (x = std::exp(x - max));
      for (int64_t p = 0; p < len; ++p) {
        f16.kernels.dequantize_row(c.view.v_row(p, 0), vr.data(), d);
        for (int64_t i = 0; i < d; ++i)
          ref[static_cast<size_t>(i)] += s[static_cast<size_t>(p)] / sum * vr[i];
      }
      for (int64_t i = 0; i < d; ++i) {
        ASSERT_NEAR(out[static_cast<size_t>(t * row + g * d + i)], ref[static_cast<size_t>(i)],
                    1e-4)
            << "token " << t << " head " << g << " i " << i;
      }
    }
  }
}

}  // namespace
}  // namespace strata::ops
