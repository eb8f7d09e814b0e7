// Compact tiles of Q4_K (TypeKernels::compact): GemmK4Like's 8-row tiles (gemm_k4_avx512.h) with
// the codes kept as nibbles and the scales and mins at 6 bits, 1152 bytes per super-block, the
// bytes of the 8 rows. The byte tile is 2.2x the rows' size; here each super-block's vectors are
// decoded in registers right before the kernel uses them (GemmK4Like::block through a view), so
// the integer sums and float operations, hence the results, are those of vec_dot.
//
// Tile of 8 rows and one super-block; sc[8r + s] / mn[8r + s] are the 6-bit scale / min of row r's
// sub-block s (as GemmK4Like::repack orders them):
//   d[8], dmin[8]: the rows' f16 scales;
//   scale_low[b] = low 4 bits of sc[b] (low nibble) and sc[b + 32] (high nibble), b < 32;
//   scale_high[b] = bits 4-5 of sc[b + 16k] at bits 2k, 2k + 1, b < 16; the same for the mins;
//   q[4p + g] = the byte tile's q[8p + g] (sub-block 2p) as low nibbles and q[8p + 4 + g]
//   (sub-block 2p + 1) as high nibbles: the rows' own packing, transposed to 8 rows x 8 bytes.

#include <immintrin.h>

#include <cstring>

#include "quant/gemm_avx512.h"
#include "quant/gemm_k4_avx512.h"
#include "quant/kernel_table.h"

namespace strata::quant {
namespace {

struct CompactK4 {
  using Bytes = GemmK4Like<false>;
  static constexpr int64_t kBlockElems = kQKK;
  static constexpr int kRows = Bytes::kRows;
  static constexpr int kGroupBlocks = 1;
  static constexpr int kMaxColumns = Bytes::kMaxColumns;
  using ColumnBlock = Bytes::ColumnBlock;

  struct SixBits {
    uint8_t low[32];
    uint8_t high[16];
  };
  struct TileBlock {
    f16_bits d[8], dmin[8];
    SixBits scales, mins;
    uint8_t q[16][64];
  };
  static_assert(sizeof(TileBlock) == kRows * sizeof(BlockQ4_K));

  // The 64 values back as bytes 0..63.
  static __m512i unpack_six_bits(const SixBits& s) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i m30 = _mm512_set1_epi8(0x30);
    const __m512i low =
        _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s.low)));
    const __m512i nibbles = _mm512_and_si512(_mm512_mask_srli_epi16(low, 0xffff0000u, low, 4), m4);
    // 128-bit lane k takes bits 2k, 2k + 1 of every byte, moved to bits 4-5.
    const __m512i high =
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s.high)));
    const __m512i moved = _mm512_slli_epi16(_mm512_srlv_epi16(high, lane_shifts()), 4);
    return _mm512_ternarylogic_epi32(nibbles, moved, m30, 0xf8);
  }
  // Word shift counts 0, 2, 4, 6 in 128-bit lanes 0..3.
  static __m512i lane_shifts() {
    return _mm512_set_epi64(0x0006000600060006, 0x0006000600060006, 0x0004000400040004,
                            0x0004000400040004, 0x0002000200020002, 0x0002000200020002, 0, 0);
  }

  static void repack(const uint8_t* const* rows, int64_t nb, TileBlock* tile) {
    alignas(64) typename Bytes::TileBlock bytes;
    for (int64_t i = 0; i < nb; ++i) {
      const BlockQ4_K* x[kRows];
      for (int r = 0; r < kRows; ++r) x[r] = reinterpret_cast<const BlockQ4_K*>(rows[r]) + i;
      const uint8_t* row_ptr[kRows];
      for (int r = 0; r < kRows; ++r) row_ptr[r] = reinterpret_cast<const uint8_t*>(x[r]);
      Bytes::repack(row_ptr, 1, &bytes);
      TileBlock& t = tile[i];
      for (int p = 0; p < 4; ++p) {
        for (int g = 0; g < 4; ++g) {
          for (int b = 0; b < 64; ++b) {
            t.q[4 * p + g][b] = static_cast<uint8_t>((bytes.q[8 * p + g][b] & 0x0f) |
                                                     ((bytes.q[8 * p + 4 + g][b] & 0x0f) << 4));
          }
        }
      }
      uint8_t sc[64], mn[64];
      for (int r = 0; r < kRows; ++r) {
        alignas(16) uint8_t sm[16];
        _mm_store_si128(reinterpret_cast<__m128i*>(sm), unpack_k4_scales_vec(x[r]->scales));
        std::memcpy(sc + 8 * r, sm, 8);
        std::memcpy(mn + 8 * r, sm + 8, 8);
        t.d[r] = x[r]->d;
        t.dmin[r] = x[r]->dmin;
      }
      pack_six_bits<64>(sc, t.scales.low, t.scales.high);
      pack_six_bits<64>(mn, t.mins.low, t.mins.high);
    }
  }

  static void prepare(const uint8_t* act, int64_t nb, ColumnBlock* column) {
    Bytes::prepare(act, nb, column);
  }

  // GemmK4Like::ByteView's vectors, decoded from a compact tile.
  struct View {
    const TileBlock& t;
    __m512i scale[4], min[2];
    __m512 rows_d, rows_dmin;

    explicit View(const TileBlock& tile) : t(tile) {
      const __m512i sc = unpack_six_bits(t.scales), mn = unpack_six_bits(t.mins);
      const __m512i sc_lo = _mm512_cvtepu8_epi16(_mm512_castsi512_si256(sc));
      const __m512i sc_hi = _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(sc, 1));
      const __m512i mn_lo = _mm512_cvtepu8_epi16(_mm512_castsi512_si256(mn));
      const __m512i mn_hi = _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(mn, 1));
      for (int v = 0; v < 4; ++v)
        scale[v] = _mm512_permutex2var_epi16(sc_lo, load512(kTables.scales[v]), sc_hi);
      for (int m = 0; m < 2; ++m)
        min[m] = _mm512_permutex2var_epi16(mn_lo, load512(kTables.mins[m]), mn_hi);
      const __m512i row_lanes = load512(kTables.row_lanes);
      rows_d = _mm512_permutexvar_ps(
          row_lanes, _mm512_castps256_ps512(
                         _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t.d)))));
      rows_dmin = _mm512_permutexvar_ps(
          row_lanes, _mm512_castps256_ps512(_mm256_cvtph_ps(
                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(t.dmin)))));
    }
    // Byte tile vector m = 8p + g (low nibbles) or 8p + 4 + g (high nibbles).
    __m512i q(int m) const {
      const __m512i v = _mm512_loadu_si512(t.q[m / 8 * 4 + m % 4]);
      const __m512i m4 = _mm512_set1_epi8(0x0f);
      return m % 8 < 4 ? _mm512_and_si512(v, m4) : _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    }
    __m512i scales(int v) const { return scale[v]; }
    __m512i mins(int m) const { return min[m]; }
    __m512 d() const { return rows_d; }
    __m512 dmin() const { return rows_dmin; }
  };

  template <int N>
  static void run(const TileBlock* tile, int64_t nb, const uint8_t* const* act,
                  const ColumnBlock* const* column, float* out, int64_t out_stride, int n_rows) {
    Bytes::template run_views<N>(nb, act, column, out, out_stride, n_rows,
                                 [tile](int64_t i) { return View(tile[i]); });
  }

  // The byte tiles of rows [r0, r0 + rows): one compact tile (the same 8 rows).
  static void expand_block(const uint8_t* tiles, int64_t stride, int64_t r0, int, int64_t nb,
                           typename Bytes::TileBlock* out) {
    const auto* t = reinterpret_cast<const TileBlock*>(tiles + r0 / kRows * stride);
    for (int64_t i = 0; i < nb; ++i) {
      const View v(t[i]);
      typename Bytes::TileBlock& b = out[i];
      for (int m = 0; m < 32; ++m) _mm512_store_si512(b.q[m], v.q(m));
      for (int s = 0; s < 4; ++s) _mm512_store_si512(b.scales[s], v.scales(s));
      for (int m = 0; m < 2; ++m) _mm512_store_si512(b.mins[m], v.mins(m));
      _mm512_store_ps(b.d, v.d());
      _mm512_store_ps(b.dmin, v.dmin());
    }
  }
};

}  // namespace

void fill_gemm_compact_k4_avx512(KernelTable& table) {
  set_compact_kernels<CompactK4>(table[GgmlType::Q4_K]);
}

}  // namespace strata::quant
