#pragma once
// Family-private: the float order shared by the AVX-512 single-row kernels (vec_dot,
// vec_dot_multi) and the 4-row tile GEMMs of Q8_0, IQ4_XS and Q6_K, which must agree bit for bit
// (see gemm_bitwise_test.cpp). A row's dot product runs as 4 float chains k = 0..3: per step (a
// group of 4 Q8_0 blocks, a super-block of IQ4_XS or Q6_K) chain k takes the exact integer sum
// isum_k of its part (Q8_0: block k of the group; the super-blocks: sub-blocks s with s % 4 == k,
// each times its integer scale) as acc_k = fma(float(isum_k), d_w * d_a, acc_k), and the row's
// result is (acc_0 + acc_2) + (acc_1 + acc_3). In a vector, chain k of row r sits in float lane
// 4r + k (a single-row kernel uses the 4 lanes of 128-bit lane k for chain k, all equal).
//
// Internal linkage on purpose (see kquants_common.h); included only by files compiled for AVX-512.

#include <immintrin.h>

#include <cstdint>

namespace strata::quant {
namespace {

// Dword indices of a 4 x 4 transpose: dword k of 128-bit lane j takes dword j of lane k.
inline __m512i dword_transpose() {
  return _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
}

// 4 x 4 transpose of 128-bit lanes: lane r of out[j] is lane j of in[r].
inline void transpose_lanes4(const __m512i in[4], __m512i out[4]) {
  const __m512i u0 = _mm512_shuffle_i64x2(in[0], in[1], _MM_SHUFFLE(1, 0, 1, 0));
  const __m512i u1 = _mm512_shuffle_i64x2(in[0], in[1], _MM_SHUFFLE(3, 2, 3, 2));
  const __m512i u2 = _mm512_shuffle_i64x2(in[2], in[3], _MM_SHUFFLE(1, 0, 1, 0));
  const __m512i u3 = _mm512_shuffle_i64x2(in[2], in[3], _MM_SHUFFLE(3, 2, 3, 2));
  out[0] = _mm512_shuffle_i64x2(u0, u2, _MM_SHUFFLE(2, 0, 2, 0));
  out[1] = _mm512_shuffle_i64x2(u0, u2, _MM_SHUFFLE(3, 1, 3, 1));
  out[2] = _mm512_shuffle_i64x2(u1, u3, _MM_SHUFFLE(2, 0, 2, 0));
  out[3] = _mm512_shuffle_i64x2(u1, u3, _MM_SHUFFLE(3, 1, 3, 1));
}

// Every dword of 128-bit lane k becomes the sum of the lane's 4 dwords (exact int32).
inline __m512i lane_totals(__m512i s) {
  const __m512i t = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_BADC));
  return _mm512_add_epi32(t, _mm512_shuffle_epi32(t, _MM_PERM_CDAB));
}

// A single row's result from its chains in float lanes 0, 4, 8, 12.
inline float finish_chains(__m512 acc) {
  const __m128 c = _mm512_castps512_ps128(_mm512_permutexvar_ps(
      _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), acc));
  const __m128 pairs = _mm_add_ps(c, _mm_movehl_ps(c, c));
  return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehdup_ps(pairs)));
}

// 16 bytes in every 128-bit lane (a tile GEMM's activations of one column).
inline __m512i broadcast16(const void* p) {
  return _mm512_broadcast_i32x4(_mm_loadu_si128(static_cast<const __m128i*>(p)));
}

// The results of the first n_rows (<= 4) rows of a tile, whose chains sit in lanes 4r + k, to
// out[0 .. n_rows).
inline void store_tile_rows4(__m512 acc, float* out, int n_rows) {
  const __m512 pairs = _mm512_add_ps(acc, _mm512_shuffle_ps(acc, acc, 0x4e));
  const __m512 all = _mm512_add_ps(pairs, _mm512_shuffle_ps(pairs, pairs, 0xb1));
  const __m512i rows = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  const __mmask8 mask = static_cast<__mmask8>((1u << n_rows) - 1);
  _mm_mask_storeu_ps(out, mask, _mm512_castps512_ps128(_mm512_permutexvar_ps(rows, all)));
}

// The results of a tile of kHalves groups of 4 rows against N columns: column c's first n_rows
// rows to out + c * out_stride.
template <int kHalves, int N>
inline void store_tile_halves(const __m512 (&acc)[kHalves][N], float* out, int64_t out_stride,
                              int n_rows) {
  for (int h = 0; h < kHalves && 4 * h < n_rows; ++h) {
    for (int c = 0; c < N; ++c) {
      const int rows = n_rows - 4 * h < 4 ? n_rows - 4 * h : 4;
      store_tile_rows4(acc[h][c], out + c * out_stride + 4 * h, rows);
    }
  }
}

}  // namespace
}  // namespace strata::quant
