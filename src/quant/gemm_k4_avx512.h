#pragma once
// Tile GEMMs of Q4_K and Q5_K weights with Q8_K activations (AVX-512 VNNI). A tile vector holds 8
// rows x 8 consecutive quants (row r in bytes 8r..8r+7); against the same 8 activation bytes
// broadcast to every row, one _mm512_dpbusd_epi32 does 64 useful multiplies, and each int32 lane
// (row r, half h) sums 4 of them. Over a sub-block of 32 a lane sums 16 products of 0..15 x
// |a| <= 128, which fits int16: _mm512_packs_epi32 of two sub-blocks puts both halves of a row's
// sub-block in one int32 lane, and _mm512_dpwssd_epi32 multiplies it by its 6-bit scale and
// accumulates, all exact. The mins meet the activation sub-block sums the same way. Float scales
// are applied once per 256-block: per row two float lanes (A: sub-blocks 0, 2, 4, 6 of Q4_K,
// elements 0..15 of every sub-block of Q5_K; B: the rest; mins A: sub-blocks 0, 1, 4, 5, B: 2, 3,
// 6, 7), acc = fma(isum, d_a * d, acc) and acc_m = fma(imin, d_a * dmin, acc_m) per block in
// order, and at the end (A + B) - (min A + min B): exactly the float operations of the single-row
// kernels (MultiK4Like in kquants_avx512.cpp), so that decode and prompt processing agree bit for
// bit.
//
// Family-private: the tile format (GemmK4Like) lives here so that the compact tiles
// (gemm_compact_k4_avx512.cpp) run it on theirs. Internal linkage on purpose (see
// kquants_common.h); included only by files compiled for AVX-512.

#include <immintrin.h>

#include <type_traits>

#include "quant/gemm_avx512.h"
#include "quant/gemm_tile.h"
#include "quant/gemm_tile_avx512.h"
#include "quant/kernel_table.h"
#include "quant/kquants_common.h"

namespace strata::quant {
namespace {

// Layout of the per-row values after the scale products: int32 lane 4L + j belongs to row
// 2L + (j & 1) (what _mm512_packs_epi32 makes of lanes (row, half) = 2 row + half).
constexpr int row_of_lane(int lane) {
  return 2 * (lane / 4) + (lane & 1);
}

struct Q4KTables {
  alignas(64) uint16_t scales[4][32];   // word indices into 8 rows x 8 scales, per sub-block pair
  alignas(64) uint16_t scales5[8][32];  // the same per sub-block (Q5_K)
  alignas(64) uint16_t mins[2][32];     // the same for the mins of sub-blocks 4m..4m+3
  alignas(64) int32_t row_lanes[16];    // float lane -> row
};
constexpr Q4KTables make_tables() {
  Q4KTables t{};
  for (int w = 0; w < 32; ++w) {
    const int lane = w / 2, j = lane % 4, row = row_of_lane(lane);
    for (int p = 0; p < 4; ++p) t.scales[p][w] = static_cast<uint16_t>(8 * row + 2 * p + j / 2);
    for (int sb = 0; sb < 8; ++sb) t.scales5[sb][w] = static_cast<uint16_t>(8 * row + sb);
    for (int m = 0; m < 2; ++m)
      t.mins[m][w] = static_cast<uint16_t>(8 * row + 4 * m + 2 * (j / 2) + w % 2);
  }
  for (int lane = 0; lane < 16; ++lane) t.row_lanes[lane] = row_of_lane(lane);
  return t;
}
constexpr Q4KTables kTables = make_tables();

inline __m512i load512(const void* p) {
  return _mm512_loadu_si512(p);
}

// Q4_K, or Q5_K with kFiveBit: a Q5_K lane over a whole sub-block could reach 16 * 31 * 128 and
// overflow int16, so its lanes are packed per half sub-block (two groups of 8), one scale product
// per sub-block instead of per pair.
template <bool kFiveBit>
struct GemmK4Like {
  using Block = std::conditional_t<kFiveBit, BlockQ5_K, BlockQ4_K>;
  static constexpr int64_t kBlockElems = kQKK;
  static constexpr int kRows = 8;
  static constexpr int kGroupBlocks = 1;
  // Two float accumulators per column (sums and mins): 6 columns measured slower.
  static constexpr int kMaxColumns = 5;
  static constexpr int kScaleVectors = kFiveBit ? 8 : 4;

  struct alignas(64) TileBlock {
    uint8_t q[32][64];  // q[4s + g]: rows x quants 32s + 8g .. 32s + 8g + 7
    // Q4_K: vector p holds the int16 scale of (row, sub-block 2p + j / 2) per lane; Q5_K: vector
    // s that of (row, sub-block s).
    uint16_t scales[kScaleVectors][32];
    uint16_t mins[2][32];   // word pairs (min of sub-blocks 4m + 2(j/2), +1) per lane
    float d[16], dmin[16];  // per lane, of its row
  };
  // Activation sub-block sums in the word order of TileBlock::mins.
  struct ColumnBlock {
    int16_t pairs[2][8];
  };

  static void repack(const uint8_t* const* rows, int64_t nb, TileBlock* tile) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i row_lanes = load512(kTables.row_lanes);
    for (int64_t i = 0; i < nb; ++i) {
      TileBlock& t = tile[i];
      const Block* x[kRows];
      for (int r = 0; r < kRows; ++r) x[r] = reinterpret_cast<const Block*>(rows[r]) + i;
      // Q5_K: bit 2p / 2p + 1 of qh[8g + t] is the fifth bit of the low / high nibble of
      // qs[32p + 8g + t].
      __m512i qh[4];
      if constexpr (kFiveBit)
        transpose_rows(
            x, [](const Block* b) { return b->qh; }, qh);
      for (int p = 0; p < 4; ++p) {
        __m512i packed[4];
        transpose_rows(
            x, [p](const Block* b) { return b->qs + 32 * p; }, packed);
        for (int g = 0; g < 4; ++g) {
          __m512i lo = _mm512_and_si512(packed[g], m4);
          __m512i hi = _mm512_and_si512(_mm512_srli_epi16(packed[g], 4), m4);
          if constexpr (kFiveBit) {
            const __m512i bit4 = _mm512_set1_epi8(0x10);
            const __mmask64 lo_bit =
                _mm512_test_epi8_mask(qh[g], _mm512_set1_epi8(static_cast<char>(1 << (2 * p))));
            const __mmask64 hi_bit =
                _mm512_test_epi8_mask(qh[g], _mm512_set1_epi8(static_cast<char>(2 << (2 * p))));
            lo = _mm512_mask_add_epi8(lo, lo_bit, lo, bit4);
            hi = _mm512_mask_add_epi8(hi, hi_bit, hi, bit4);
          }
          _mm512_store_si512(t.q[8 * p + g], lo);
          _mm512_store_si512(t.q[8 * p + 4 + g], hi);
        }
      }
      alignas(32) uint8_t sc[64], mn[64];
      alignas(16) f16_bits d[8], dmin[8];
      for (int r = 0; r < kRows; ++r) {
        const __m128i sm = unpack_k4_scales_vec(x[r]->scales);
        _mm_storel_epi64(reinterpret_cast<__m128i*>(sc + 8 * r), sm);
        _mm_storel_epi64(reinterpret_cast<__m128i*>(mn + 8 * r), _mm_unpackhi_epi64(sm, sm));
        d[r] = x[r]->d;
        dmin[r] = x[r]->dmin;
      }
      const __m512i sc_lo = _mm512_cvtepu8_epi16(_mm256_load_si256(reinterpret_cast<__m256i*>(sc)));
      const __m512i sc_hi =
          _mm512_cvtepu8_epi16(_mm256_load_si256(reinterpret_cast<__m256i*>(sc + 32)));
      const __m512i mn_lo = _mm512_cvtepu8_epi16(_mm256_load_si256(reinterpret_cast<__m256i*>(mn)));
      const __m512i mn_hi =
          _mm512_cvtepu8_epi16(_mm256_load_si256(reinterpret_cast<__m256i*>(mn + 32)));
      for (int v = 0; v < kScaleVectors; ++v) {
        const uint16_t* index = kFiveBit ? kTables.scales5[v] : kTables.scales[v];
        _mm512_store_si512(t.scales[v], _mm512_permutex2var_epi16(sc_lo, load512(index), sc_hi));
      }
      for (int m = 0; m < 2; ++m) {
        _mm512_store_si512(t.mins[m],
                           _mm512_permutex2var_epi16(mn_lo, load512(kTables.mins[m]), mn_hi));
      }
      const __m512 df = _mm512_castps256_ps512(
          _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(d))));
      const __m512 dminf = _mm512_castps256_ps512(
          _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(dmin))));
      _mm512_store_ps(t.d, _mm512_permutexvar_ps(row_lanes, df));
      _mm512_store_ps(t.dmin, _mm512_permutexvar_ps(row_lanes, dminf));
    }
  }

  static void prepare(const uint8_t* act, int64_t nb, ColumnBlock* column) {
    const auto* y = reinterpret_cast<const BlockQ8_K*>(act);
    for (int64_t i = 0; i < nb; ++i) {
      int16_t sub[8];
      for (int s = 0; s < 8; ++s)
        sub[s] = static_cast<int16_t>(y[i].bsums[2 * s] + y[i].bsums[2 * s + 1]);
      for (int m = 0; m < 2; ++m) {
        for (int j = 0; j < 4; ++j) {
          column[i].pairs[m][2 * j] = sub[4 * m + 2 * (j / 2)];
          column[i].pairs[m][2 * j + 1] = sub[4 * m + 2 * (j / 2) + 1];
        }
      }
    }
  }

  // The vectors of one repacked TileBlock as the kernel reads them (compact tiles give the same
  // vectors decoded from their own bytes).
  struct ByteView {
    const TileBlock& t;
    __m512i q(int m) const { return _mm512_load_si512(t.q[m]); }
    __m512i scales(int v) const { return _mm512_load_si512(t.scales[v]); }
    __m512i mins(int m) const { return _mm512_load_si512(t.mins[m]); }
    __m512 d() const { return _mm512_load_ps(t.d); }
    __m512 dmin() const { return _mm512_load_ps(t.dmin); }
  };

  // Super-block i of the tile `t` against N columns, into their accumulators.
  template <int N, typename View>
  [[gnu::always_inline]] static inline void block(const View& t, const BlockQ8_K* const* y,
                                                  const ColumnBlock* const* column, int64_t i,
                                                  __m512 (&acc)[N], __m512 (&acc_m)[N]) {
    const __m512i zero = _mm512_setzero_si512();
    __m512i isum[N];
    for (int c = 0; c < N; ++c) isum[c] = zero;
    if constexpr (kFiveBit) {
      for (int sb = 0; sb < 8; ++sb) {
        // Groups 0, 1 (lo) and 2, 3 (hi) of sub-block sb.
        __m512i lo[N], hi[N];
        for (int c = 0; c < N; ++c) lo[c] = hi[c] = zero;
        for (int g = 0; g < 2; ++g) {
          const __m512i wlo = t.q(4 * sb + g);
          const __m512i whi = t.q(4 * sb + 2 + g);
          for (int c = 0; c < N; ++c) {
            const int8_t* a = y[c][i].qs + 32 * sb + 8 * g;
            lo[c] = _mm512_dpbusd_epi32(lo[c], wlo, broadcast8(a));
            hi[c] = _mm512_dpbusd_epi32(hi[c], whi, broadcast8(a + 16));
          }
        }
        const __m512i sc = t.scales(sb);
        for (int c = 0; c < N; ++c)
          isum[c] = _mm512_dpwssd_epi32(isum[c], _mm512_packs_epi32(lo[c], hi[c]), sc);
      }
    } else {
      for (int p = 0; p < 4; ++p) {
        // Sub-blocks 2p (lo) and 2p + 1 (hi).
        __m512i lo[N], hi[N];
        for (int c = 0; c < N; ++c) lo[c] = hi[c] = zero;
        for (int g = 0; g < 4; ++g) {
          const __m512i wlo = t.q(8 * p + g);
          const __m512i whi = t.q(8 * p + 4 + g);
          for (int c = 0; c < N; ++c) {
            const int8_t* a = y[c][i].qs + 64 * p + 8 * g;
            lo[c] = _mm512_dpbusd_epi32(lo[c], wlo, broadcast8(a));
            hi[c] = _mm512_dpbusd_epi32(hi[c], whi, broadcast8(a + 32));
          }
        }
        const __m512i sc = t.scales(p);
        for (int c = 0; c < N; ++c)
          isum[c] = _mm512_dpwssd_epi32(isum[c], _mm512_packs_epi32(lo[c], hi[c]), sc);
      }
    }
    const __m512i mins0 = t.mins(0);
    const __m512i mins1 = t.mins(1);
    const __m512 d = t.d();
    const __m512 dmin = t.dmin();
    for (int c = 0; c < N; ++c) {
      const ColumnBlock& cb = column[c][i];
      const __m512i s0 =
          _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(cb.pairs[0])));
      const __m512i s1 =
          _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(cb.pairs[1])));
      const __m512i imin = _mm512_dpwssd_epi32(_mm512_madd_epi16(mins0, s0), mins1, s1);
      // The float order of the single-row kernels (MultiK4Like in kquants_avx512.cpp).
      const __m512 da = _mm512_set1_ps(y[c][i].d);
      acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[c]), _mm512_mul_ps(da, d), acc[c]);
      acc_m[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(imin), _mm512_mul_ps(da, dmin), acc_m[c]);
    }
  }

  // The first n_rows rows of each column's results.
  template <int N>
  static void store(const __m512 (&acc)[N], const __m512 (&acc_m)[N], float* out,
                    int64_t out_stride, int n_rows) {
    // Lanes 4L + j and 4L + j + 2 hold the same row: add them, sums minus mins, then gather rows
    // 0..7.
    const __m512i rows = _mm512_setr_epi32(0, 1, 4, 5, 8, 9, 12, 13, 0, 0, 0, 0, 0, 0, 0, 0);
    const __mmask8 mask = static_cast<__mmask8>((1u << n_rows) - 1);
    for (int c = 0; c < N; ++c) {
      const __m512 both =
          _mm512_sub_ps(_mm512_add_ps(acc[c], _mm512_shuffle_ps(acc[c], acc[c], 0x4e)),
                        _mm512_add_ps(acc_m[c], _mm512_shuffle_ps(acc_m[c], acc_m[c], 0x4e)));
      _mm256_mask_storeu_ps(out + c * out_stride, mask,
                            _mm512_castps512_ps256(_mm512_permutexvar_ps(rows, both)));
    }
  }

  // The product over nb super-blocks, super-block i seen through view_of(i).
  template <int N, typename ViewOf>
  [[gnu::always_inline]] static inline void run_views(int64_t nb, const uint8_t* const* act,
                                                      const ColumnBlock* const* column, float* out,
                                                      int64_t out_stride, int n_rows,
                                                      ViewOf view_of) {
    const BlockQ8_K* y[N];
    for (int c = 0; c < N; ++c) y[c] = reinterpret_cast<const BlockQ8_K*>(act[c]);
    __m512 acc[N], acc_m[N];
    for (int c = 0; c < N; ++c) acc[c] = acc_m[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) block<N>(view_of(i), y, column, i, acc, acc_m);
    store<N>(acc, acc_m, out, out_stride, n_rows);
  }

  template <int N>
  static void run(const TileBlock* tile, int64_t nb, const uint8_t* const* act,
                  const ColumnBlock* const* column, float* out, int64_t out_stride, int n_rows) {
    run_views<N>(nb, act, column, out, out_stride, n_rows,
                 [tile](int64_t i) { return ByteView{tile[i]}; });
  }
};

}  // namespace
}  // namespace strata::quant
