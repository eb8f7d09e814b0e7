// Tile GEMM of Q8_0 weights with Q8_0 activations (AVX-512 VNNI). A tile covers 4 rows and a
// group of 4 consecutive blocks; tile vector m holds bytes 4m..4m+3 of every (row, block): 128-bit
// lane r is row r, its dword k block k. Against the 16 activation bytes of the same positions,
// broadcast to every lane, one _mm512_dpbusd_epi32 does 64 useful multiplies, and int32 lane
// 4r + k ends up with the whole integer dot product of row r, block k: no horizontal sums.
// _mm512_dpbusd_epi32 needs one unsigned side, so the tile stores the weights plus 128 and each
// lane starts at -128 * (sum of the activation block), which prepare computes once per column.
//
// The float order is the one of the single-row kernels (StepQ8_0 in legacy_avx512.cpp), so that
// decode, the multi-row dot products and this GEMM give bit-identical results: per row 4 float
// lanes, lane k taking blocks k, k + 4, k + 8, ... in order as acc = fma(S, d_w * d_a, acc), and
// at the end (lane 0 + lane 2) + (lane 1 + lane 3). A missing last block is a zero block: S = 0
// and d_w * d_a = 0 leave the lane unchanged (a lane is never -0).

#include <immintrin.h>

#include "quant/blocks.h"
#include "quant/gemm_avx512.h"
#include "quant/gemm_tile.h"

namespace strata::quant {
namespace {

// Word indices into (bytes [0,64), [64,128)) of 4 consecutive blocks: `lo` (`hi`) gathers dword m
// (4 + m) of block k into dword 4m + k, `hi` reading bytes 120..135 from the first 16 bytes (see
// Quad); d[r] gathers the f16 scale of block k into word 4r + k.
struct Q8Indices {
  alignas(64) uint16_t lo[32];
  alignas(64) uint16_t hi[32];
  alignas(64) uint16_t d[4][32];
};
constexpr Q8Indices make_q8_indices() {
  constexpr int kBytes = sizeof(BlockQ8_0);
  Q8Indices t{};
  for (int w = 0; w < 32; ++w) {
    const int m = w / 8, k = (w / 2) % 4, half = w % 2;
    t.lo[w] = static_cast<uint16_t>((kBytes * k + 2 + 4 * m + 2 * half) / 2);
    const int hi = kBytes * k + 18 + 4 * m + 2 * half;
    t.hi[w] = static_cast<uint16_t>((hi >= 4 * kBytes - 16 ? hi - (4 * kBytes - 16) : hi) / 2);
  }
  for (int r = 0; r < 4; ++r)
    for (int k = 0; k < 4; ++k) t.d[r][4 * r + k] = static_cast<uint16_t>(kBytes * k / 2);
  return t;
}
constexpr Q8Indices kIndices = make_q8_indices();

struct GemmQ8_0 {
  static constexpr int64_t kBlockElems = kQK;
  static constexpr int kRows = 4;
  static constexpr int kGroupBlocks = 4;
  static constexpr int kMaxColumns = 8;

  struct alignas(64) TileBlock {
    uint8_t q[8][64];  // q[m]: lane r, dword k = bytes 4m..4m+3 of row r, block k, plus 128
    float d[16];       // lane 4r + k: scale of row r, block k
  };
  struct alignas(64) ColumnBlock {
    int8_t q[8][16];   // q[m]: dword k = bytes 4m..4m+3 of block k
    int32_t start[4];  // -128 * sum of block k
    float d[4];
  };

  // Blocks i..i+3 (zero blocks past `count`): u, v = bytes [0,64), [64,128); u2 = u with bytes
  // [120,136) in place of its first 16.
  struct Quad {
    __m512i u, u2, v;
  };
  static Quad load(const BlockQ8_0* b, int64_t count) {
    const auto* p = reinterpret_cast<const uint8_t*>(b);
    if (count == kGroupBlocks) {
      const __m512i u = _mm512_loadu_si512(p);
      const __m128i last = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 120));
      return {u, _mm512_inserti32x4(u, last, 0), _mm512_loadu_si512(p + 64)};
    }
    // At most 102 bytes, nothing at [120,136); the masked loads read nothing past the row.
    const int64_t bytes = count * static_cast<int64_t>(sizeof(BlockQ8_0));
    const auto mask = [&](int64_t offset) {
      const int64_t n = std::max<int64_t>(0, bytes - offset);
      return n >= 64 ? ~__mmask64{0} : (__mmask64{1} << n) - 1;
    };
    const __m512i u = _mm512_maskz_loadu_epi8(mask(0), p);
    return {u, _mm512_inserti32x4(u, _mm_setzero_si128(), 0),
            _mm512_maskz_loadu_epi8(mask(64), p + 64)};
  }
  // Lane m of lo (hi) holds dword m (4 + m) of blocks 0..3.
  static void dwords_by_position(const Quad& q, __m512i& lo, __m512i& hi) {
    lo = _mm512_permutex2var_epi16(q.u, _mm512_load_si512(kIndices.lo), q.v);
    hi = _mm512_permutex2var_epi16(q.u2, _mm512_load_si512(kIndices.hi), q.v);
  }

  static void repack(const uint8_t* const* rows, int64_t nb, TileBlock* tile) {
    const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int64_t i = 0; i < nb; i += kGroupBlocks) {
      TileBlock& t = tile[i / kGroupBlocks];
      const int64_t count = std::min<int64_t>(kGroupBlocks, nb - i);
      __m512i lo[kRows], hi[kRows];
      __m512i d = _mm512_setzero_si512();
      for (int r = 0; r < kRows; ++r) {
        const Quad q = load(reinterpret_cast<const BlockQ8_0*>(rows[r]) + i, count);
        dwords_by_position(q, lo[r], hi[r]);
        const __mmask32 words = 0xfu << (4 * r);
        d = _mm512_or_si512(
            d, _mm512_maskz_permutex2var_epi16(words, q.u, _mm512_load_si512(kIndices.d[r]), q.v));
      }
      // 4 x 4 transpose of 128-bit lanes: q[m] lane r = lane m of row r's lo (hi for m >= 4).
      for (int h = 0; h < 2; ++h) {
        const __m512i* v = h == 0 ? lo : hi;
        const __m512i u0 = _mm512_shuffle_i64x2(v[0], v[1], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512i u1 = _mm512_shuffle_i64x2(v[0], v[1], _MM_SHUFFLE(3, 2, 3, 2));
        const __m512i u2 = _mm512_shuffle_i64x2(v[2], v[3], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512i u3 = _mm512_shuffle_i64x2(v[2], v[3], _MM_SHUFFLE(3, 2, 3, 2));
        const __m512i m[4] = {_mm512_shuffle_i64x2(u0, u2, _MM_SHUFFLE(2, 0, 2, 0)),
                              _mm512_shuffle_i64x2(u0, u2, _MM_SHUFFLE(3, 1, 3, 1)),
                              _mm512_shuffle_i64x2(u1, u3, _MM_SHUFFLE(2, 0, 2, 0)),
                              _mm512_shuffle_i64x2(u1, u3, _MM_SHUFFLE(3, 1, 3, 1))};
        for (int j = 0; j < 4; ++j)
          _mm512_store_si512(t.q[4 * h + j], _mm512_xor_si512(m[j], offset));
      }
      _mm512_store_ps(t.d, _mm512_cvtph_ps(_mm512_castsi512_si256(d)));
    }
  }

  static void prepare(const uint8_t* act, int64_t nb, ColumnBlock* column) {
    const auto* y = reinterpret_cast<const BlockQ8_0*>(act);
    for (int64_t i = 0; i < nb; i += kGroupBlocks) {
      ColumnBlock& cb = column[i / kGroupBlocks];
      const int64_t count = std::min<int64_t>(kGroupBlocks, nb - i);
      __m512i lo, hi;
      dwords_by_position(load(y + i, count), lo, hi);
      _mm512_storeu_si512(cb.q[0], lo);
      _mm512_storeu_si512(cb.q[4], hi);
      for (int k = 0; k < kGroupBlocks; ++k) {
        int32_t sum = 0;
        if (k < count)
          for (int e = 0; e < kQK; ++e) sum += y[i + k].qs[e];
        cb.start[k] = -128 * sum;
        cb.d[k] = k < count ? f16_to_f32(y[i + k].d) : 0.0f;
      }
    }
  }

  template <int N>
  static void run(const TileBlock* tile, int64_t groups, const uint8_t* const*,
                  const ColumnBlock* const* column, float* out, int64_t out_stride, int n_rows) {
    const auto bcast = [](const void* p) {
      return _mm512_broadcast_i32x4(_mm_loadu_si128(static_cast<const __m128i*>(p)));
    };
    __m512 acc[N];
    for (int c = 0; c < N; ++c) acc[c] = _mm512_setzero_ps();
    for (int64_t g = 0; g < groups; ++g) {
      const TileBlock& t = tile[g];
      // Two chains per column (positions 0..3 and 4..7), added exactly at the end.
      __m512i sum[N], sum2[N];
      for (int c = 0; c < N; ++c) {
        sum[c] = bcast(column[c][g].start);
        sum2[c] = _mm512_setzero_si512();
      }
      for (int m = 0; m < 4; ++m) {
        const __m512i w = _mm512_load_si512(t.q[m]);
        const __m512i w2 = _mm512_load_si512(t.q[m + 4]);
        for (int c = 0; c < N; ++c) {
          sum[c] = _mm512_dpbusd_epi32(sum[c], w, bcast(column[c][g].q[m]));
          sum2[c] = _mm512_dpbusd_epi32(sum2[c], w2, bcast(column[c][g].q[m + 4]));
        }
      }
      for (int c = 0; c < N; ++c) sum[c] = _mm512_add_epi32(sum[c], sum2[c]);
      const __m512 d = _mm512_load_ps(t.d);
      for (int c = 0; c < N; ++c) {
        const __m512 da = _mm512_broadcast_f32x4(_mm_loadu_ps(column[c][g].d));
        acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[c]), _mm512_mul_ps(d, da), acc[c]);
      }
    }
    // Lane 4r: (lane 4r + lane 4r + 2) + (lane 4r + 1 + lane 4r + 3); then rows 0..3.
    const __m512i rows = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __mmask8 mask = static_cast<__mmask8>((1u << n_rows) - 1);
    for (int c = 0; c < N; ++c) {
      const __m512 pairs = _mm512_add_ps(acc[c], _mm512_shuffle_ps(acc[c], acc[c], 0x4e));
      const __m512 all = _mm512_add_ps(pairs, _mm512_shuffle_ps(pairs, pairs, 0xb1));
      _mm_mask_storeu_ps(out + c * out_stride, mask,
                         _mm512_castps512_ps128(_mm512_permutexvar_ps(rows, all)));
    }
  }
};

}  // namespace

void gemm_q8_0_avx512(int64_t n, const void* weights, int64_t w_stride, int64_t n_rows,
                      const uint8_t* const* act, int64_t n_cols, float* out, int64_t out_stride) {
  gemm_tiles<GemmQ8_0>(n, weights, w_stride, n_rows, act, n_cols, out, out_stride);
}

}  // namespace strata::quant
