#pragma once
// The values half of attention over a Q8_0 KV cache, in integers: a chunk's softmax weights meet
// the values' codes as int16 x int16 products summed exactly in int32, with one float step per
// block of 32 dimensions. For query row r and block b, over the positions j the row sees in the
// chunk (the others weigh 0):
//   w_j    = p_j * d_j                          (p_j the softmax weight, d_j value row j's block
//                                                scale; one f32 rounding)
//   m      = max_j |w_j|
//   q_j    = round_half_even(w_j * (32767 / m)) (int16; all 0 where m is 0)
//   isum_i = sum_j q_j * c_j[i]                 (c_j[i] the int8 codes; exact)
//   acc_i  = fma(float(isum_i), m / 32767, acc_i)
// (multiply-add without fusing on CPUs without FMA). Rounding a weight to int16 moves it by at
// most m / 65534: 2^-16 of the chunk's largest, against the 2^-8 of its block's largest value
// that a Q8_0 code already carries. Every level computes exactly this (the AVX-512 kernel with
// VNNI's int16 dot products, two positions per instruction), so the paths agree bit for bit.
//
// Layouts, for a chunk of `stride` positions (even) and n_blocks blocks (d = 32 * n_blocks):
//   pairs[p * d + i]   positions 2p and 2p + 1's codes of dimension i as int16, in the low and
//                      high half of a dword (code 0 past `count`);
//   value_scales[b * stride + j]  position j's scale of block b (0 past `count`);
//   q[(r * n_blocks + b) * stride / 2 + p]  row r's int16 weights of positions 2p, 2p + 1 in
//                      block b, paired the same way; q_scales[r * n_blocks + b] = m / 32767.

#include <cstdint>

namespace strata::ops::q8_values {

// The chunk's value rows (count of them, rows[j] a row of n_blocks Q8_0 blocks) laid out.
using PairsFn = void (*)(const uint8_t* const* rows, int64_t count, int64_t n_blocks,
                         int64_t stride, uint32_t* pairs, float* value_scales);
// n_rows rows' weights (row r's at weights + r * stride), positions [begin, end) seen, rounded.
using WeightsFn = void (*)(const float* weights, int64_t n_rows, int64_t begin, int64_t end,
                           const float* value_scales, int64_t n_blocks, int64_t stride, uint32_t* q,
                           float* q_scales);
// acc[r * d + i] takes the products of pairs [first_pair, end_pair) for n_rows rows.
using ValuesFn = void (*)(const uint32_t* q, const float* q_scales, int64_t n_rows,
                          const uint32_t* pairs, int64_t first_pair, int64_t end_pair,
                          int64_t n_blocks, int64_t stride, float* acc);

struct Kernels {
  PairsFn pairs;
  WeightsFn weights;
  ValuesFn values;
};

// For the instruction-set level attention runs at: avx512 (with VNNI), avx2 (FMA; the loops with
// the same arithmetic, kept to check it against) or baseline.
Kernels kernels_avx512();
Kernels kernels_avx2();
Kernels kernels_avx2_loops();
Kernels kernels_baseline();

}  // namespace strata::ops::q8_values
