#pragma once
// Tile GEMMs of the quad formats (quad_avx512.h: Q8_0, Q4_0, IQ4_NL, MXFP4) with Q8_0 activations
// (AVX-512 VNNI). A tile covers 8 rows (two halves of 4) and a quad of 4 consecutive blocks; in a
// half, tile vector m holds values 4m..4m+3 of every (row, block): 128-bit lane r is row r, its
// dword k block k (a 4 x 4 dword transpose of the row's quad, then a 4 x 4 transpose of 128-bit
// lanes across the rows). Against the 16 activation bytes of the same positions, broadcast to every
// lane, one _mm512_dpbusd_epi32 does 64 useful multiplies, and int32 lane 4r + k ends up with the
// whole integer dot product of row r, block k: no horizontal sums. _mm512_dpbusd_epi32 needs one
// unsigned side, so the tile stores the values plus 128 and each lane starts at -128 * (sum of the
// activation block), which prepare computes once per column. Then float chain k per row, in the
// order of chains_avx512.h, which the single-row kernels (MultiQuad) follow too.
//
// Family-private: the tile format (GemmQuad) lives here so that the compact tiles
// (gemm_compact_quad_avx512.cpp) expand into it. Internal linkage on purpose (see
// kquants_common.h); included only by files compiled for AVX-512.

#include <immintrin.h>

#include "quant/blocks.h"
#include "quant/chains_avx512.h"
#include "quant/gemm_avx512.h"
#include "quant/gemm_tile.h"
#include "quant/kernel_table.h"
#include "quant/quad_avx512.h"

namespace strata::quant {
namespace {

// Two groups of 4 rows (halves) share each activation broadcast: one activation load per two
// vpdpbusd.
template <typename Weights>
struct GemmQuad {
  static constexpr int kHalves = 2;
  static constexpr int64_t kBlockElems = kQK;
  static constexpr int kRows = 4 * kHalves;
  static constexpr int kGroupBlocks = kQuadBlocks;
  // Two accumulators per column and half (int sum, float); 4 columns measured fastest.
  static constexpr int kMaxColumns = 4;

  struct alignas(64) Half {
    uint8_t q[8][64];  // q[m]: lane r, dword k = values 4m..4m+3 of row r, block k, plus 128
    float d[16];       // lane 4r + k: scale of row r, block k
  };
  struct TileBlock {
    Half half[kHalves];  // rows 4h .. 4h + 3
  };
  struct alignas(64) ColumnBlock {
    int8_t q[8][16];   // q[m]: dword k = values 4m..4m+3 of block k
    int32_t start[4];  // -128 * sum of block k
    float d[4];
  };

  template <typename Loader>
  static Quad load(const uint8_t* p, int64_t count) {
    return count == kQuadBlocks ? Loader::quad(p) : Loader::partial(p, count);
  }

  static void repack_half(const uint8_t* const* rows, int64_t i, int64_t count, Half& t) {
    const __m512i transpose = dword_transpose();
    // Values plus 128: the codes plus 128 - kOffset (modulo 256: Q8_0's signed bytes plus 128).
    const __m512i offset = _mm512_set1_epi8(static_cast<char>(128 - Weights::kOffset));
    const __m512i first_floats = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    __m512i x[4], y[4];
    __m512 d = _mm512_setzero_ps();
    for (int r = 0; r < 4; ++r) {
      const Quad q = load<Weights>(rows[r] + i * Weights::kBlockBytes, count);
      x[r] = _mm512_permutexvar_epi32(transpose, q.x);
      y[r] = _mm512_permutexvar_epi32(transpose, q.y);
      // Row r's 4 block scales into lanes 4r .. 4r + 3.
      const __m512 row_d = _mm512_permutexvar_ps(first_floats, q.d);
      d = _mm512_castsi512_ps(_mm512_mask_broadcast_i32x4(
          _mm512_castps_si512(d), static_cast<__mmask16>(0xfu << (4 * r)),
          _mm512_castsi512_si128(_mm512_castps_si512(row_d))));
    }
    __m512i m[4];
    transpose_lanes4(x, m);
    for (int j = 0; j < 4; ++j) _mm512_store_si512(t.q[j], _mm512_add_epi8(m[j], offset));
    transpose_lanes4(y, m);
    for (int j = 0; j < 4; ++j) _mm512_store_si512(t.q[4 + j], _mm512_add_epi8(m[j], offset));
    _mm512_store_ps(t.d, d);
  }

  static void repack(const uint8_t* const* rows, int64_t nb, TileBlock* tile) {
    for (int64_t i = 0; i < nb; i += kQuadBlocks) {
      const int64_t count = std::min<int64_t>(kQuadBlocks, nb - i);
      for (int h = 0; h < kHalves; ++h)
        repack_half(rows + 4 * h, i, count, tile[i / kQuadBlocks].half[h]);
    }
  }

  static void prepare(const uint8_t* act, int64_t nb, ColumnBlock* column) {
    const __m512i transpose = dword_transpose();
    const __m512i ones = _mm512_set1_epi8(1);
    const __m512i first_dwords = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    for (int64_t i = 0; i < nb; i += kQuadBlocks) {
      ColumnBlock& cb = column[i / kQuadBlocks];
      const int64_t count = std::min<int64_t>(kQuadBlocks, nb - i);
      const Quad q = load<Q8_0Quads>(act + i * Q8_0Quads::kBlockBytes, count);
      _mm512_store_si512(cb.q[0], _mm512_permutexvar_epi32(transpose, q.x));
      _mm512_store_si512(cb.q[4], _mm512_permutexvar_epi32(transpose, q.y));
      // 1 x a summed per lane: the sum of block k in every dword of lane k.
      const __m512i sums = lane_totals(
          _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, q.x), ones, q.y));
      const __m512i start = _mm512_mullo_epi32(sums, _mm512_set1_epi32(-128));
      _mm_store_si128(reinterpret_cast<__m128i*>(cb.start),
                      _mm512_castsi512_si128(_mm512_permutexvar_epi32(first_dwords, start)));
      _mm_store_ps(cb.d, _mm512_castps512_ps128(_mm512_permutexvar_ps(first_dwords, q.d)));
    }
  }

  template <int N>
  static void run(const TileBlock* tile, int64_t groups, const uint8_t* const*,
                  const ColumnBlock* const* column, float* out, int64_t out_stride, int n_rows) {
    __m512 acc[kHalves][N];
    for (int h = 0; h < kHalves; ++h)
      for (int c = 0; c < N; ++c) acc[h][c] = _mm512_setzero_ps();
    for (int64_t g = 0; g < groups; ++g) {
      const TileBlock& t = tile[g];
      __m512i sum[kHalves][N];
      for (int c = 0; c < N; ++c) {
        const __m512i start = broadcast16(column[c][g].start);
        for (int h = 0; h < kHalves; ++h) sum[h][c] = start;
      }
      for (int m = 0; m < 8; ++m) {
        __m512i w[kHalves];
        for (int h = 0; h < kHalves; ++h) w[h] = _mm512_load_si512(t.half[h].q[m]);
        for (int c = 0; c < N; ++c) {
          const __m512i a = broadcast16(column[c][g].q[m]);
          for (int h = 0; h < kHalves; ++h) sum[h][c] = _mm512_dpbusd_epi32(sum[h][c], w[h], a);
        }
      }
      for (int h = 0; h < kHalves; ++h) {
        const __m512 d = _mm512_load_ps(t.half[h].d);
        for (int c = 0; c < N; ++c) {
          const __m512 da = _mm512_broadcast_f32x4(_mm_load_ps(column[c][g].d));
          acc[h][c] =
              _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[h][c]), _mm512_mul_ps(d, da), acc[h][c]);
        }
      }
    }
    store_tile_halves(acc, out, out_stride, n_rows);
  }
};

}  // namespace
}  // namespace strata::quant
