// attend_block (a block of query tokens of one sequence sharing each decoded chunk of keys and
// values) gives every token exactly, bit for bit, what attend_group gives it alone: whatever the
// other tokens of the block, their causal limits, the cache type, the page layout, the head size
// and the group size (groups under 4 rows score a chunk together with the next tokens' rows where
// those see the same positions of it: the blocks below that share full chunks check that too).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kv_test_cache.h"
#include "ops/attention.h"
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
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t g = 0; g < group; ++g) {
      const auto ref = test_kv::exact_attention(c.view, &q[static_cast<size_t>(t * row + g * d)], 0,
                                                lengths[static_cast<size_t>(t)], 0.125, nullptr);
      for (int64_t i = 0; i < d; ++i) {
        ASSERT_NEAR(out[static_cast<size_t>(t * row + g * d + i)], ref[static_cast<size_t>(i)],
                    1e-4)
            << "token " << t << " head " << g << " i " << i;
      }
    }
  }
}

// Sliding windows (gpt-oss): token t sees [first[t], length[t]) only, positions before the window
// may hold anything (NaN here), and with attention sinks the weights' denominator gains
// e^sink: both as the definition says, and a block of tokens bit for bit what each gets alone.
TEST(BlockAttention, SlidingWindowsAndSinksMatchTheDefinition) {
  const int64_t d = 64, n = 200, group = 4;
  const float sinks[group] = {2.5f, -1.0f, 0.3f, 6.0f};
  for (GgmlType type : {GgmlType::F16, GgmlType::Q8_0}) {
    for (const int64_t window : {1, 16, 63, 64, 65, 128}) {
      SCOPED_TRACE(testing::Message() << ggml_type_name(type) << " window " << window);
      const Cache c = make_cache(type, 1, d, n, 16, 31);
      std::vector<int64_t> lengths = {1, 16, 17, 64, 65, 66, 129, 130, 190, 200};
      std::vector<int64_t> first;
      for (int64_t len : lengths) first.push_back(std::max<int64_t>(0, len - window));
      const int64_t row = group * d, n_tokens = static_cast<int64_t>(lengths.size());
      const auto q = test::random_floats(static_cast<size_t>(n_tokens * row), 32, 1.5f);
      for (const float* sink : {static_cast<const float*>(nullptr), sinks}) {
        std::vector<float> out(static_cast<size_t>(n_tokens * row));
        AttendOptions options;
        options.first_position = first.data();
        options.sinks = sink;
        attend_block(c.view, 0, q.data(), row, group, n_tokens, lengths.data(), 0.125f, out.data(),
                     row, options);
        for (int64_t t = 0; t < n_tokens; ++t) {
          std::vector<float> alone(static_cast<size_t>(row));
          AttendOptions one = options;
          one.first_position = &first[static_cast<size_t>(t)];
          attend_block(c.view, 0, q.data() + t * row, row, group, 1,
                       &lengths[static_cast<size_t>(t)], 0.125f, alone.data(), row, one);
          ASSERT_EQ(std::memcmp(alone.data(), out.data() + t * row, alone.size() * sizeof(float)),
                    0)
              << "token " << t;
          for (int64_t g = 0; g < group; ++g) {
            const auto ref = test_kv::exact_attention(
                c.view, &q[static_cast<size_t>(t * row + g * d)], first[static_cast<size_t>(t)],
                lengths[static_cast<size_t>(t)], 0.125, sink ? &sink[g] : nullptr);
            for (int64_t i = 0; i < d; ++i) {
              ASSERT_NEAR(out[static_cast<size_t>(t * row + g * d + i)],
                          ref[static_cast<size_t>(i)], test_kv::exact_attention_tolerance(type))
                  << "token " << t << " head " << g << " i " << i;
            }
          }
        }
        // Positions before a window never matter: the last token's result is the same with
        // every position before its window poisoned (NaN rows).
        const size_t last = lengths.size() - 1;
        Cache poisoned = make_cache(type, 1, d, n, 16, 31);
        for (int64_t p = 0; p < first[last]; ++p) {
          std::fill_n(poisoned.view.k_row(p, 0), poisoned.view.head_row_bytes, uint8_t{0xff});
          std::fill_n(poisoned.view.v_row(p, 0), poisoned.view.head_row_bytes, uint8_t{0xff});
        }
        std::vector<float> got(static_cast<size_t>(row));
        AttendOptions one = options;
        one.first_position = &first[last];
        attend_block(poisoned.view, 0, q.data() + last * row, row, group, 1, &lengths[last], 0.125f,
                     got.data(), row, one);
        EXPECT_EQ(std::memcmp(got.data(), out.data() + last * row, got.size() * sizeof(float)), 0);
      }
    }
  }
}

}  // namespace
}  // namespace strata::ops
