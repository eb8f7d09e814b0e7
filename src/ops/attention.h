#pragma once
// Attention of query heads over a KV cache, with an online (flash-style) softmax: one pass over
// the cached positions, keys and values read once, no n_positions-sized score buffer.

#include <cstdint>

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
