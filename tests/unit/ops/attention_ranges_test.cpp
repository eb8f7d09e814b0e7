// Flash decoding (attention.h): a long context's positions split into ranges of kAttentionRange,
// each attended on its own over every KV head at once (attend_range) and merged in order
// (merge_partial, finish_attention), give bit for bit what attend_block gives head by head, and
// both give the definition across range boundaries, with windows and sinks.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "kv_test_cache.h"
#include "ops/attention.h"
#include "support/test_support.h"

namespace strata::ops {
namespace {

using test_kv::Cache;

struct Case {
  GgmlType type;
  int64_t d, heads, group, page_size;
};

// Every range of the block computed apart over all heads, merged in order.
std::vector<float> attend_by_ranges(const KvLayerView& kv, const float* q, int64_t group,
                                    const std::vector<int64_t>& lengths,
                                    const AttendOptions& options, float scale) {
  const int64_t d = kv.head_dim, n_tokens = static_cast<int64_t>(lengths.size());
  const int64_t row = kv.n_kv_heads * group * d, rows = n_tokens * kv.n_kv_heads * group;
  const int64_t n_ranges = attention_ranges(*std::max_element(lengths.begin(), lengths.end()));
  AttentionPartials partials, total;
  partials.reset(n_ranges, rows, d);
  total.reset(1, rows, d);
  // Ranges computed last to first: the order they are computed in must not matter.
  for (int64_t r = n_ranges - 1; r >= 0; --r)
    attend_range(kv, 0, kv.n_kv_heads, q, row, group, n_tokens, lengths.data(), scale, r, options,
                 partials.range(r));
  const AttentionPartial sum = total.range(0);
  clear_partial(sum, rows, d);
  for (int64_t r = 0; r < n_ranges; ++r) merge_partial(partials.range(r), rows, d, sum);
  std::vector<float> out(static_cast<size_t>(n_tokens * row), -7.0f);
  finish_attention(sum, n_tokens, kv.n_kv_heads * group, d, options.sinks, out.data(), row);
  return out;
}

TEST(AttentionRanges, RangesOverEveryHeadGiveAttendBlocksBitsAndTheDefinition) {
  constexpr float kScale = 0.125f;
  const int64_t n = 1300;  // three ranges, the last one ragged
  // Across every range boundary: inside the first range, on either side of 512 and 1024, a
  // prefill-like run and an arbitrary block.
  const std::vector<std::vector<int64_t>> blocks = {{1},
                                                    {511},
                                                    {512},
                                                    {513},
                                                    {1024},
                                                    {1025},
                                                    {1300},
                                                    {1290, 1291, 1292, 1293, 1294, 1295},
                                                    {1300, 3, 700, 512, 513, 1024}};
  for (const Case c : {Case{GgmlType::F16, 128, 4, 8, 0}, Case{GgmlType::Q8_0, 128, 4, 8, 48},
                       Case{GgmlType::F16, 40, 2, 3, 16}, Case{GgmlType::Q8_0, 64, 3, 2, 0}}) {
    const Cache cache = test_kv::make_cache(c.type, c.heads, c.d, n, c.page_size, 5);
    test_kv::store_random(cache.view, n, 6);
    const int64_t row = c.heads * c.group * c.d;
    std::vector<float> sinks(static_cast<size_t>(c.heads * c.group));
    for (size_t i = 0; i < sinks.size(); ++i) sinks[i] = 0.5f * static_cast<float>(i % 5) - 1.0f;
    for (const int64_t window : {int64_t{0}, int64_t{600}}) {
      for (const bool with_sinks : {false, true}) {
        for (const auto& lengths : blocks) {
          SCOPED_TRACE(testing::Message()
                       << ggml_type_name(c.type) << " d " << c.d << " heads " << c.heads
                       << " group " << c.group << " pages " << c.page_size << " window " << window
                       << " sinks " << with_sinks << " first length " << lengths[0]);
          const int64_t n_tokens = static_cast<int64_t>(lengths.size());
          std::vector<int64_t> first;
          for (int64_t len : lengths)
            first.push_back(window ? std::max<int64_t>(0, len - window) : 0);
          const auto q = test::random_floats(static_cast<size_t>(n_tokens * row), 7, 1.5f);
          AttendOptions options;
          options.first_position = first.data();
          options.sinks = with_sinks ? sinks.data() : nullptr;
          const std::vector<float> by_ranges =
              attend_by_ranges(cache.view, q.data(), c.group, lengths, options, kScale);
          std::vector<float> by_head(by_ranges.size(), -7.0f);
          for (int64_t h = 0; h < c.heads; ++h) {
            AttendOptions head_options = options;
            if (with_sinks) head_options.sinks = sinks.data() + h * c.group;
            attend_block(cache.view, h, q.data() + h * c.group * c.d, row, c.group, n_tokens,
                         lengths.data(), kScale, by_head.data() + h * c.group * c.d, row,
                         head_options);
          }
          ASSERT_EQ(std::memcmp(by_ranges.data(), by_head.data(), by_head.size() * sizeof(float)),
                    0);
          // The definition, for the first and the last query row of each token.
          for (int64_t t = 0; t < n_tokens; ++t) {
            for (const int64_t hg : {int64_t{0}, c.heads * c.group - 1}) {
              const auto ref = test_kv::exact_attention(
                  cache.view, &q[static_cast<size_t>(t * row + hg * c.d)],
                  first[static_cast<size_t>(t)], lengths[static_cast<size_t>(t)], kScale,
                  with_sinks ? &sinks[static_cast<size_t>(hg)] : nullptr, hg / c.group);
              for (int64_t i = 0; i < c.d; ++i)
                ASSERT_NEAR(by_ranges[static_cast<size_t>(t * row + hg * c.d + i)],
                            ref[static_cast<size_t>(i)], 1e-4)
                    << "token " << t << " row " << hg << " i " << i;
            }
          }
        }
      }
    }
  }
}

// A token whose window lies wholly after a range leaves that range's partial empty (max -inf),
// and merging an empty partial changes nothing.
TEST(AttentionRanges, ARangeOutsideTheWindowIsEmptyAndMergesToNothing) {
  const Cache cache = test_kv::make_cache(GgmlType::F16, 2, 64, 1100, 0, 8);
  test_kv::store_random(cache.view, 1100, 9);
  const int64_t group = 2, row = 2 * group * 64, rows = 2 * group;
  const auto q = test::random_floats(static_cast<size_t>(row), 10, 1.0f);
  const int64_t length = 1100, first = 700;  // ranges 1 and 2 only
  AttendOptions options;
  options.first_position = &first;
  AttentionPartials p;
  p.reset(3, rows, 64);
  for (int64_t r = 0; r < 3; ++r)
    attend_range(cache.view, 0, 2, q.data(), row, group, 1, &length, 0.125f, r, options,
                 p.range(r));
  for (int64_t i = 0; i < rows; ++i) {
    EXPECT_EQ(p.range(0).max[i], -std::numeric_limits<float>::infinity());
    EXPECT_GT(p.range(1).max[i], -std::numeric_limits<float>::infinity());
  }
  AttentionPartials with, without;
  with.reset(1, rows, 64);
  without.reset(1, rows, 64);
  for (AttentionPartials* s : {&with, &without}) {
    const AttentionPartial sum = s->range(0);
    clear_partial(sum, rows, 64);
    for (int64_t r = s == &with ? 0 : 1; r < 3; ++r) merge_partial(p.range(r), rows, 64, sum);
  }
  std::vector<float> a(static_cast<size_t>(row)), b(a.size());
  finish_attention(with.range(0), 1, rows, 64, nullptr, a.data(), row);
  finish_attention(without.range(0), 1, rows, 64, nullptr, b.data(), row);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

// The schedule: a decode step at depth splits into ranges (whole slots; on many threads more tasks
// than KV heads), a short context or a prefill's many blocks keep a task per KV head, and a
// partial buffer past 64 MiB is never asked for.
TEST(AttentionRanges, RangesWhereTheyEndSoonerOrReadWholeSlots) {
  const auto decode = [](int64_t positions) {
    return std::vector<AttentionBlockShape>{{1, positions, positions}};
  };
  // Qwen3-30B-A3B: 4 KV heads, 32 query heads of 128.
  EXPECT_TRUE(attention_by_ranges(decode(8192), 4, 32, 128, 2));    // 16 ranges, a tie: slots
  EXPECT_TRUE(attention_by_ranges(decode(8192), 4, 32, 128, 16));   // 16 tasks, not 4
  EXPECT_TRUE(attention_by_ranges(decode(1024), 4, 32, 128, 2));    // 2 equal ranges
  EXPECT_FALSE(attention_by_ranges(decode(600), 4, 32, 128, 2));    // a 512 and an 88
  EXPECT_FALSE(attention_by_ranges(decode(300), 4, 32, 128, 2));    // one range: one task
  EXPECT_FALSE(attention_by_ranges(decode(8192), 64, 64, 128, 2));  // plenty of head tasks
  // A prefill of 512 tokens at 4096 in blocks of 16: 32 blocks x 4 heads.
  std::vector<AttentionBlockShape> prefill;
  for (int64_t b = 0; b < 32; ++b) {
    const int64_t last = 4096 + 16 * (b + 1);
    prefill.push_back({16, 16 * last - 120, last});
  }
  EXPECT_FALSE(attention_by_ranges(prefill, 4, 32, 128, 2));
  // 256 tokens of 128 heads at 256K positions: 512 ranges of partials, 16 GiB; never.
  EXPECT_FALSE(attention_by_ranges({{256, 256 * 262144, 262144}}, 2, 128, 128, 16));
}

// The time a blocking takes: a verify step's tokens in one block decode each chunk once (the
// trained model's shape: 2 KV heads of 2 query heads, 2 threads), while a prefill on many threads
// needs blocks small enough to give every thread a task. Units: one row scoring one position.
TEST(AttentionRanges, MakespanSharesDecodedChunksAndKeepsThreadsBusy) {
  // One token of 1000 positions by ranges: a 512 and a 488 over both KV heads, per position the
  // chunk's decode and 2 rows.
  const double per_position = kDecodeRows + 2;
  EXPECT_DOUBLE_EQ(attention_makespan({{1, 1000, 1000}}, true, 2, 4, 2), 2 * 512 * per_position);
  EXPECT_DOUBLE_EQ(attention_makespan({{1, 1000, 1000}}, false, 2, 4, 2), 1000 * per_position);
  // Six verify tokens at 700: one block of six against six blocks of one, each by KV head.
  std::vector<AttentionBlockShape> one_block{{6, 6 * 703 - 15, 706}}, six_blocks;
  for (int64_t t = 0; t < 6; ++t) six_blocks.push_back({1, 701 + t, 701 + t});
  EXPECT_LT(attention_makespan(one_block, false, 2, 4, 2),
            0.7 * attention_makespan(six_blocks, false, 2, 4, 2));
  // 16 prefill tokens at 4096 on 8 threads: one block leaves 6 threads idle, four blocks do not.
  std::vector<AttentionBlockShape> whole{{16, 16 * 4104, 4112}}, quarters;
  for (int64_t b = 0; b < 4; ++b) quarters.push_back({4, 4 * (4098 + 4 * b), 4100 + 4 * b});
  EXPECT_LT(attention_makespan(quarters, false, 2, 64, 8),
            0.6 * attention_makespan(whole, false, 2, 64, 8));
}

}  // namespace
}  // namespace strata::ops
