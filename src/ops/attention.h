#pragma once
// Attention of query heads over a KV cache, with an online (flash-style) softmax: one pass over
// the cached positions, keys and values read once, no n_positions-sized score buffer.

#include <cstdint>
#include <vector>

#include "gguf/ggml_type.h"

namespace strata::ops {

constexpr int64_t kMaxHeadDim = 1024;
constexpr int64_t kMaxGroup = 64;  // query heads per KV head

// One layer's keys and values. Position p lives in storage slot
//   pages[p / page_size] * page_size + p % page_size   when `pages` is set (a paged cache whose
//                                                      sequences share one pool of pages),
//   p                                                  otherwise (one contiguous sequence),
// and the vector of (position, kv head) at base + (slot * n_kv_heads + kv_head) * head_row_bytes.
// Types: F16 or Q8_0.
struct KvLayerView {
  GgmlType type = GgmlType::F16;
  uint8_t* k = nullptr;
  uint8_t* v = nullptr;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t head_row_bytes = 0;
  int64_t page_size = 0;
  const int32_t* pages = nullptr;  // [capacity / page_size] page of each block of positions
  int64_t capacity = INT64_MAX;    // positions that have storage (unbounded: owner did not say)

  int64_t slot(int64_t pos) const {
    return pages ? pages[pos / page_size] * page_size + pos % page_size : pos;
  }
  // Positions from `pos` on that lie in consecutive slots (to the end of pos's page).
  int64_t contiguous_from(int64_t pos) const {
    return pages ? page_size - pos % page_size : INT64_MAX;
  }
  uint8_t* k_row(int64_t pos, int64_t head) const {
    return k + (slot(pos) * n_kv_heads + head) * head_row_bytes;
  }
  uint8_t* v_row(int64_t pos, int64_t head) const {
    return v + (slot(pos) * n_kv_heads + head) * head_row_bytes;
  }
};

// Writes the keys and values of all kv heads (each [n_kv_heads * head_dim] floats) at `pos`.
void kv_store(const KvLayerView& kv, int64_t pos, const float* keys, const float* values);

// For the n_group query heads that share kv_head (GQA), each q_g = q + g * head_dim:
// out_g = softmax(q_g . K[0..n_positions) * scale) V, written at out + g * head_dim.
// Each key and value row is read once for the whole group, which divides the KV-cache traffic of
// a decode step by the group size (8 for Qwen3-30B-A3B). Positions are scored a chunk of 64 at a
// time (keys decoded transposed, so a chunk's scores are plain vector FMAs), chunks starting at
// position 0 whatever the page size: paged and contiguous caches give bit-identical results.
void attend_group(const KvLayerView& kv, int64_t kv_head, const float* q, int64_t n_group,
                  int64_t n_positions, float scale, float* out);

// attend_group for n_tokens query tokens of one sequence at once: token t's heads at
// q + t * q_stride (each + g * head_dim) attend over positions [0, n_positions[t]) and write
// out + t * out_stride (+ g * head_dim). Each chunk of keys and values is decoded once for the
// whole block (prefill: consecutive tokens of a sequence), and every token gets exactly, bit for
// bit, what attend_group gives it alone: its arithmetic does not depend on the other tokens.
//
// Options (gpt-oss): a sliding window, where token t sees only positions
// [first_position[t], n_positions[t]); and attention sinks, one logit per query head (sinks[g],
// not scaled) that joins the softmax denominator only, so the weights sum to less than 1.
struct AttendOptions {
  const int64_t* first_position = nullptr;  // [n_tokens]; null: 0
  const float* sinks = nullptr;             // [n_group]; null: none
};
void attend_block(const KvLayerView& kv, int64_t kv_head, const float* q, int64_t q_stride,
                  int64_t n_group, int64_t n_tokens, const int64_t* n_positions, float scale,
                  float* out, int64_t out_stride, const AttendOptions& options = {});

// Flash decoding: a token's positions are split into ranges of kAttentionRange at its multiples
// (whatever the other tokens, the threads or the page size), each range's attention is computed
// on its own as a partial result, and the partials are merged in range order. attend_block does
// exactly that range by range; a caller with few tokens and many threads computes the ranges of a
// long context in parallel (attend_range) and merges them after (finish_attention), bit for bit
// what attend_block gives.
constexpr int64_t kAttentionRange = 512;  // a multiple of the 64-position chunk
constexpr int64_t kAttentionLanes = 16;   // softmax sums kept per lane, added in a fixed tree

inline int64_t attention_ranges(int64_t n_positions) {
  return (n_positions + kAttentionRange - 1) / kAttentionRange;
}

// Whether a step's attention runs as (block of tokens, range) tasks over every KV head rather than
// (block, KV head) tasks over every range, for blocks (of consecutive tokens of a sequence) whose
// summed lengths are block_positions: where that ends sooner on n_threads threads (judged by the
// larger of the work per thread and the longest task), and on a tie where the head tasks are few
// (the range tasks read whole cache slots). Not when the partials would pass 64 MiB. Either gives
// the same bits.
struct AttentionBlockShape {
  int64_t tokens = 0, positions = 0, longest = 0;  // its tokens, their lengths summed, the longest
};
bool attention_by_ranges(const std::vector<AttentionBlockShape>& blocks, int64_t n_kv_heads,
                         int64_t n_heads, int64_t head_dim, int n_threads);

// How long the step's attention takes on n_threads threads, in units of one query row scoring one
// position, scheduled as the model runs it: tasks taken longest first, by the least busy thread.
// A task decodes each chunk of keys and values once for all its rows (about as costly as
// kDecodeRows rows), so blocks of more tokens share that work but leave fewer tasks to spread.
constexpr double kDecodeRows = 2;
double attention_makespan(const std::vector<AttentionBlockShape>& blocks, bool by_ranges,
                          int64_t n_kv_heads, int64_t n_heads, int n_threads);

// Attention of n_rows query rows over one range, not yet normalized: acc = sum_j e^(s_j - max)
// v_j, the sum of e^(s_j - max) kept in kAttentionLanes lanes. A row with no position in the
// range has max -inf and zeros.
struct AttentionPartial {
  float* acc = nullptr;    // [n_rows][head_dim]
  float* max = nullptr;    // [n_rows]
  float* lanes = nullptr;  // [n_rows][kAttentionLanes]

  // The same storage from row `row` on.
  AttentionPartial from_row(int64_t row, int64_t head_dim) const {
    return {acc + row * head_dim, max + row, lanes + row * kAttentionLanes};
  }
};

// Empties n_rows rows (max -inf, zeros): what a range without positions leaves, and a sum's start.
void clear_partial(const AttentionPartial& p, int64_t n_rows, int64_t head_dim);

// Storage for the partials of n_ranges ranges of n_rows rows each.
class AttentionPartials {
 public:
  void reset(int64_t n_ranges, int64_t n_rows, int64_t head_dim);
  AttentionPartial range(int64_t r);

 private:
  std::vector<float> acc_, max_, lanes_;
  int64_t n_rows_ = 0, head_dim_ = 0;
};

// Range `range` of attend_block for the KV heads [first_head, first_head + n_heads) at once (a
// step then reads whole cache slots): token t's rows are its heads in order, each head's n_group
// query heads within, at q + t * q_stride + (h * n_group + g) * head_dim; partial row
// (t * n_heads + h) * n_group + g.
void attend_range(const KvLayerView& kv, int64_t first_head, int64_t n_heads, const float* q,
                  int64_t q_stride, int64_t n_group, int64_t n_tokens, const int64_t* n_positions,
                  float scale, int64_t range, const AttendOptions& options,
                  const AttentionPartial& partial);

// sum <- sum merged with the next range's partial (rows with max -inf in `next` are left as they
// are). Start a sum with clear_partial.
void merge_partial(const AttentionPartial& next, int64_t n_rows, int64_t head_dim,
                   const AttentionPartial& sum);

// The merged sum normalized into out: token t's rows (n_group_rows of them, query head g's
// sink sinks[g] when set) at out + t * out_stride + g * head_dim.
void finish_attention(const AttentionPartial& sum, int64_t n_tokens, int64_t n_group_rows,
                      int64_t head_dim, const float* sinks, float* out, int64_t out_stride);

// The instruction-set paths attention can take: `automatic` (the default) is the best this CPU
// runs. Every path gives the same bits on FMA CPUs (baseline, without FMA, rounds each multiply);
// tests force each one the CPU has to check that. Process-wide; forcing a path the CPU lacks
// makes attention throw.
enum class AttentionPath { automatic, baseline, avx2_loops, avx2, avx512 };
void set_attention_path(AttentionPath path);

// One query head (n_group = 1).
inline void attend(const KvLayerView& kv, int64_t kv_head, const float* q, int64_t n_positions,
                   float scale, float* out) {
  attend_group(kv, kv_head, q, 1, n_positions, scale, out);
}

}  // namespace strata::ops
