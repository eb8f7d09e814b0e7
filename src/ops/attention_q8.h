#pragma once
// Attention scores over a Q8_0 KV cache in integers, as GGUF engines compute a Q8_0 dot product:
// the query is rounded to Q8_0 (a scale and 32 int8 codes per block), each block of 32 gives the
// exact integer sum of its code products, and
//   score(q, k) = scale * fma(float(isum[nb-1]), dk[nb-1] * dq[nb-1], ... fma(float(isum[0]),
//                                                          dk[0] * dq[0], 0))
// (multiply-add without fusing on CPUs without FMA). Every level computes exactly this, so the
// AVX-512 VNNI kernel (which multiplies the codes in int8) and the loops give the same bits.
//
// A chunk's keys are laid out for it: dword g (4 codes) of block b of key j at
// keys[(8b + g) * stride + j] with 128 added to each code (they read as unsigned bytes), the key's
// block scale at key_scales[b * stride + j]; keys from `count` up to the next multiple of 16 are
// zero codes with scale 0. A query row: its dwords [n_blocks * 8], scales [n_blocks] and offsets
// [n_blocks] (128 * the sum of the block's codes, which the +128 of the keys added).

#include <cstdint>

namespace strata::ops::q8_scores {

struct QueryRows {
  const uint32_t* dwords;  // [rows][n_blocks * 8]
  const float* scales;     // [rows][n_blocks]
  const int32_t* offsets;  // [rows][n_blocks]
};

// One query row from its n_blocks Q8_0 blocks.
void prepare_query(const void* q8_0_blocks, int64_t n_blocks, uint32_t* dwords, float* scales,
                   int32_t* offsets);

using KeysFn = void (*)(const uint8_t* const* rows, int64_t count, int64_t n_blocks, int64_t stride,
                        uint32_t* keys, float* key_scales);
// scores[r * stride + j] for rows r < n_rows (at most 4) and keys j < 16 * n_vectors (at most
// stride).
using ScoresFn = void (*)(const QueryRows& q, int64_t n_rows, const uint32_t* keys,
                          const float* key_scales, int64_t n_vectors, int64_t n_blocks,
                          int64_t stride, float scale, float* scores);

struct Kernels {
  KeysFn keys;
  ScoresFn scores;
};

// For the instruction-set level attention runs at: avx512 (with VNNI), avx2 (FMA; the loops with
// the same arithmetic, kept to check it against) or baseline.
Kernels kernels_avx512();
Kernels kernels_avx2();
Kernels kernels_avx2_loops();
Kernels kernels_baseline();

}  // namespace strata::ops::q8_scores
