// Flash decoding's merge: partial attention results of consecutive position ranges combined in
// range order, then normalized (attention.h).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "ops/attention.h"

namespace strata::ops {

void AttentionPartials::reset(int64_t n_ranges, int64_t n_rows, int64_t head_dim) {
  n_rows_ = n_rows;
  head_dim_ = head_dim;
  acc_.resize(static_cast<size_t>(n_ranges * n_rows * head_dim));
  max_.resize(static_cast<size_t>(n_ranges * n_rows));
  lanes_.resize(static_cast<size_t>(n_ranges * n_rows * kAttentionLanes));
}

AttentionPartial AttentionPartials::range(int64_t r) {
  return {acc_.data() + r * n_rows_ * head_dim_, max_.data() + r * n_rows_,
          lanes_.data() + r * n_rows_ * kAttentionLanes};
}

bool attention_by_ranges(const std::vector<AttentionBlockShape>& blocks, int64_t n_kv_heads,
                         int64_t n_heads, int64_t head_dim, int n_threads) {
  double total = 0, longest_head_task = 0, longest_range_task = 0, partial_floats = 0;
  for (const AttentionBlockShape& b : blocks) {
    total += static_cast<double>(n_kv_heads) * static_cast<double>(b.positions);
    longest_head_task = std::max(longest_head_task, static_cast<double>(b.positions));
    const int64_t range = std::min(b.longest, kAttentionRange);
    longest_range_task = std::max(longest_range_task, static_cast<double>(n_kv_heads) *
                                                          static_cast<double>(b.tokens * range));
    partial_floats += static_cast<double>(b.tokens * n_heads * attention_ranges(b.longest) *
                                          (head_dim + 1 + kAttentionLanes));
  }
  if (partial_floats > static_cast<double>(int64_t{16} << 20)) return false;
  const double per_thread = total / n_threads;
  const double by_head = std::max(per_thread, longest_head_task);
  const double by_range = std::max(per_thread, longest_range_task);
  const bool few_head_tasks =
      static_cast<int64_t>(blocks.size()) * n_kv_heads < 8 * static_cast<int64_t>(n_threads);
  return by_range < by_head || (by_range == by_head && few_head_tasks);
}

double attention_makespan(const std::vector<AttentionBlockShape>& blocks, bool by_ranges,
                          int64_t n_kv_heads, int64_t n_heads, int n_threads) {
  const double group = static_cast<double>(n_heads) / static_cast<double>(n_kv_heads);
  std::vector<double> tasks;
  for (const AttentionBlockShape& b : blocks) {
    // Per position of the longest token: one decode and the rows of the tokens that reach it.
    const double longest = static_cast<double>(b.longest);
    const double per_position = kDecodeRows + group * static_cast<double>(b.positions) / longest;
    if (!by_ranges) {
      tasks.insert(tasks.end(), static_cast<size_t>(n_kv_heads), longest * per_position);
      continue;
    }
    for (int64_t r = 0; r < attention_ranges(b.longest); ++r) {
      const auto span =
          static_cast<double>(std::min(kAttentionRange, b.longest - r * kAttentionRange));
      tasks.push_back(static_cast<double>(n_kv_heads) * span * per_position);
    }
  }
  std::sort(tasks.begin(), tasks.end(), std::greater<>());
  std::vector<double> busy(static_cast<size_t>(std::max(n_threads, 1)), 0.0);
  for (const double t : tasks) *std::min_element(busy.begin(), busy.end()) += t;
  return *std::max_element(busy.begin(), busy.end());
}

void clear_partial(const AttentionPartial& p, int64_t n_rows, int64_t head_dim) {
  std::fill(p.max, p.max + n_rows, -std::numeric_limits<float>::infinity());
  std::fill(p.lanes, p.lanes + n_rows * kAttentionLanes, 0.0f);
  std::fill(p.acc, p.acc + n_rows * head_dim, 0.0f);
}

void merge_partial(const AttentionPartial& next, int64_t n_rows, int64_t head_dim,
                   const AttentionPartial& sum) {
  for (int64_t row = 0; row < n_rows; ++row) {
    const float m = next.max[row];
    if (m == -std::numeric_limits<float>::infinity()) continue;  // no position of this row here
    float* acc = sum.acc + row * head_dim;
    const float* next_acc = next.acc + row * head_dim;
    float* lanes = sum.lanes + row * kAttentionLanes;
    const float* next_lanes = next.lanes + row * kAttentionLanes;
    if (sum.max[row] == -std::numeric_limits<float>::infinity()) {  // the first: taken as it is
      std::copy(next_acc, next_acc + head_dim, acc);
      std::copy(next_lanes, next_lanes + kAttentionLanes, lanes);
      sum.max[row] = m;
      continue;
    }
    const float top = std::max(sum.max[row], m);
    const float keep = std::exp(sum.max[row] - top), add = std::exp(m - top);
    for (int64_t i = 0; i < head_dim; ++i) acc[i] = acc[i] * keep + next_acc[i] * add;
    for (int64_t l = 0; l < kAttentionLanes; ++l) lanes[l] = lanes[l] * keep + next_lanes[l] * add;
    sum.max[row] = top;
  }
}

void finish_attention(const AttentionPartial& sum, int64_t n_tokens, int64_t n_group_rows,
                      int64_t head_dim, const float* sinks, float* out, int64_t out_stride) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t g = 0; g < n_group_rows; ++g) {
      const int64_t row = t * n_group_rows + g;
      float lanes[kAttentionLanes];
      std::copy(sum.lanes + row * kAttentionLanes, sum.lanes + (row + 1) * kAttentionLanes, lanes);
      for (int64_t w = kAttentionLanes / 2; w >= 1; w /= 2) {
        for (int64_t l = 0; l < w; ++l) lanes[l] += lanes[l + w];
      }
      float inv = lanes[0] > 0 ? 1.0f / lanes[0] : 0.0f;
      if (sinks) {
        // The sink joins the denominator: sum e^(s - m) + e^(sink - m), taken over max(m, sink).
        const float m = sum.max[row];
        const float top = std::max(m, sinks[g]);
        const float kept = std::exp(m - top);
        inv = kept / (lanes[0] * kept + std::exp(sinks[g] - top));
      }
      const float* acc = sum.acc + row * head_dim;
      float* o = out + t * out_stride + g * head_dim;
      for (int64_t i = 0; i < head_dim; ++i) o[i] = acc[i] * inv;
    }
  }
}

}  // namespace strata::ops
