#pragma once
// Tile GEMMs of IQ4_XS and Q6_K weights with Q8_K activations (AVX-512 VNNI): super-blocks of 256
// with a signed integer scale per sub-block (see super_codes_avx512.h). A tile covers 8 rows (two
// halves of 4) and one super-block. In a half, tile vector m = 4z + j holds, in 128-bit lane r and
// dword k, the 4 codes j of lane k of the row's code vector v[z] (a 4 x 4 dword transpose of v[z],
// then a 4 x 4 transpose of 128-bit lanes across the rows); the activations are transposed the same
// way once per column. Against the 16 activation bytes broadcast to every lane, one
// _mm512_dpbusd_epi32 does 64 useful multiplies, and int32 lane 4r + k sums sub-block s (s % 4 ==
// k) of row r without horizontal sums. The vectors of one set (4 consecutive sub-blocks: 8 vectors
// of IQ4_XS, 4 of Q6_K) start each lane at -offset * (activation sum of its sub-block), so the lane
// ends with the signed dot product of the sub-block; one _mm512_mullo_epi32 by the scales of the 4
// rows x 4 sub-blocks and an add give isum_k. Then float chain k per row, in the order of
// chains_avx512.h, which the single-row kernels follow too: decode and prompt processing agree bit
// for bit.
//
// int32 bounds: a sub-block's lane is at most 32 * 241 * 127 (IQ4_XS, codes) before its start and
// 32 * 127 * 127 after; times a scale (|s| <= 32; Q6_K: 16 * 32 * 127 times |s| <= 128) and summed
// over 2 (4) sets it stays below 2^26.
//
// Family-private: the tile format (GemmSuper) lives here so that the compact tiles
// (gemm_compact_avx512.cpp) build theirs from it. Internal linkage on purpose (see
// kquants_common.h); included only by files compiled for AVX-512.

#include <immintrin.h>

#include "quant/chains_avx512.h"
#include "quant/gemm_tile.h"
#include "quant/super_codes_avx512.h"

namespace strata::quant {
namespace {

// Two groups of 4 rows (halves) share each activation broadcast: one activation load per two
// vpdpbusd.
template <typename Codes>
struct GemmSuper {
  static constexpr int kHalves = 2;
  using Block = typename Codes::Block;
  static constexpr int64_t kBlockElems = kQKK;
  static constexpr int kRows = 4 * kHalves;
  static constexpr int kGroupBlocks = 1;
  // Three accumulators per column and half (set sum, isum, float): 4 columns (3 and 5 measured
  // no faster).
  static constexpr int kMaxColumns = 4;
  static constexpr int kSets = Codes::kSubBlocks / 4;
  static constexpr int kSetVectors = 16 / kSets;

  struct alignas(64) Half {
    uint8_t q[16][64];          // q[4z + j]: lane r, dword k = codes 4j..4j+3 of v[z] lane k, row r
    int32_t scales[kSets][16];  // lane 4r + k: scale of row r, sub-block 4 set + k
    float d[16];                // lane 4r + k: d of row r
  };
  struct TileBlock {
    Half half[kHalves];  // rows 4h .. 4h + 3
  };
  struct alignas(64) ColumnBlock {
    int8_t q[16][16];         // q[4z + j]: dword k = activations 4j..4j+3 of a[z] lane k
    int32_t start[kSets][4];  // -offset * sum of sub-block 4 set + k
    float d;
  };

  static void repack_half(const uint8_t* const* rows, int64_t i, Half& t) {
    const __m512i transpose = dword_transpose();
    const Block* x[4];
    for (int r = 0; r < 4; ++r) x[r] = reinterpret_cast<const Block*>(rows[r]) + i;
    __m512i v[4][4];
    for (int r = 0; r < 4; ++r) Codes::codes(*x[r], v[r]);
    for (int z = 0; z < 4; ++z) {
      __m512i by_row[4], out[4];
      for (int r = 0; r < 4; ++r) by_row[r] = _mm512_permutexvar_epi32(transpose, v[r][z]);
      transpose_lanes4(by_row, out);
      for (int j = 0; j < 4; ++j) _mm512_store_si512(t.q[4 * z + j], out[j]);
    }
    __m512i scales[4], by_set[4];
    for (int r = 0; r < 4; ++r) scales[r] = Codes::scales(*x[r]);
    transpose_lanes4(scales, by_set);
    for (int s = 0; s < kSets; ++s) _mm512_store_si512(t.scales[s], by_set[s]);
    alignas(16) f16_bits d[8] = {x[0]->d, x[1]->d, x[2]->d, x[3]->d};
    const __m512 df = _mm512_castps256_ps512(
        _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(d))));
    _mm512_store_ps(t.d,
                    _mm512_permutexvar_ps(
                        _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3), df));
  }

  static void repack(const uint8_t* const* rows, int64_t nb, TileBlock* tile) {
    for (int64_t i = 0; i < nb; ++i)
      for (int h = 0; h < kHalves; ++h) repack_half(rows + 4 * h, i, tile[i].half[h]);
  }

  static void prepare(const uint8_t* act, int64_t nb, ColumnBlock* column) {
    const auto* y = reinterpret_cast<const BlockQ8_K*>(act);
    const __m512i transpose = dword_transpose();
    for (int64_t i = 0; i < nb; ++i) {
      ColumnBlock& cb = column[i];
      __m512i a[4];
      Codes::activations(y[i], a);
      for (int z = 0; z < 4; ++z)
        _mm512_store_si512(cb.q[4 * z], _mm512_permutexvar_epi32(transpose, a[z]));
      for (int s = 0; s < Codes::kSubBlocks; ++s)
        cb.start[s / 4][s % 4] = -Codes::kOffset * Codes::sub_block_sum(y[i], s);
      cb.d = y[i].d;
    }
  }

  template <int N>
  static void run(const TileBlock* tile, int64_t nb, const uint8_t* const*,
                  const ColumnBlock* const* column, float* out, int64_t out_stride, int n_rows) {
    __m512 acc[kHalves][N];
    for (int h = 0; h < kHalves; ++h)
      for (int c = 0; c < N; ++c) acc[h][c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      const TileBlock& t = tile[i];
      __m512i isum[kHalves][N];
      for (int s = 0; s < kSets; ++s) {
        __m512i sum[kHalves][N];
        for (int c = 0; c < N; ++c) {
          const __m512i start = broadcast16(column[c][i].start[s]);
          for (int h = 0; h < kHalves; ++h) sum[h][c] = start;
        }
        for (int j = 0; j < kSetVectors; ++j) {
          const int m = s * kSetVectors + j;
          __m512i w[kHalves];
          for (int h = 0; h < kHalves; ++h) w[h] = _mm512_load_si512(t.half[h].q[m]);
          for (int c = 0; c < N; ++c) {
            const __m512i a = broadcast16(column[c][i].q[m]);
            for (int h = 0; h < kHalves; ++h) sum[h][c] = _mm512_dpbusd_epi32(sum[h][c], w[h], a);
          }
        }
        for (int h = 0; h < kHalves; ++h) {
          const __m512i sc = _mm512_load_si512(t.half[h].scales[s]);
          for (int c = 0; c < N; ++c) {
            const __m512i scaled = _mm512_mullo_epi32(sum[h][c], sc);
            isum[h][c] = s == 0 ? scaled : _mm512_add_epi32(isum[h][c], scaled);
          }
        }
      }
      for (int h = 0; h < kHalves; ++h) {
        const __m512 d = _mm512_load_ps(t.half[h].d);
        for (int c = 0; c < N; ++c) {
          acc[h][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[h][c]),
                                      _mm512_mul_ps(d, _mm512_set1_ps(column[c][i].d)), acc[h][c]);
        }
      }
    }
    store_tile_halves(acc, out, out_stride, n_rows);
  }
};

}  // namespace
}  // namespace strata::quant
