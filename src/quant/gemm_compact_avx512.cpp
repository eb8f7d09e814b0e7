// Compact tiles of Q6_K and IQ4_XS (TypeKernels::compact): the 4-row tiles of GemmSuper
// (gemm_super_avx512.h) with their codes kept at the format's own width, so that a tile takes about
// the bytes of its rows. The byte tiles are 1.6x (Q6_K) and 1.9x (IQ4_XS) the rows' size, which a
// decode GEMV streaming from RAM pays for; the compact tiles are unpacked in registers (2-3
// instructions per 64 codes) right before their vpdpbusd. The integer sums and float operations are
// those of GemmSuper, hence of vec_dot (chains_avx512.h): the same bits on every path.
//
// Tile of 4 rows and one super-block (tile vector m = the byte tile's q[m]):
//   both: the rows' f16 d, int8 scales (lane 4r + k of a set: row r, sub-block 4 set + k), then
//   Q6_K (840 bytes = 4 x 210), per set s: low[p] = low 4 bits of m = 4s + 2p (low nibble) and
//     4s + 2p + 1 (high nibble), high = bits 4-5 of m = 4s + t at bits 2t, 2t + 1;
//   IQ4_XS (552 bytes, 4 x 136 + 8): low[p] = table indices of m = 2p and 2p + 1.

#include <immintrin.h>

#include <cstring>
#include <vector>

#include "quant/gemm_avx512.h"
#include "quant/gemm_super_avx512.h"
#include "quant/kernel_table.h"

namespace strata::quant {
namespace {

using TileVectors = uint8_t[16][64];  // the byte tile's q

// Nibble pairs of the tile vectors' low 4 bits (Q6_K) or table indices (IQ4_XS).
inline void pack_nibbles(const uint8_t (&lo)[64], const uint8_t (&hi)[64], uint8_t (&out)[64]) {
  for (int b = 0; b < 64; ++b)
    out[b] = static_cast<uint8_t>((lo[b] & 0x0f) | ((hi[b] & 0x0f) << 4));
}

struct CompactQ6KCodes {
  using Codes = Q6KCodes;
  // Set by set, in the order the kernel reads them (a stream that only goes forward).
  struct Packed {
    struct {
      uint8_t low[2][64];
      uint8_t high[64];
    } set[4];
  };
  static void pack(const TileVectors& q, Packed& out) {
    for (int s = 0; s < 4; ++s) {
      for (int p = 0; p < 2; ++p)
        pack_nibbles(q[4 * s + 2 * p], q[4 * s + 2 * p + 1], out.set[s].low[p]);
      for (int b = 0; b < 64; ++b) {
        int h = 0;
        for (int t = 0; t < 4; ++t) h |= ((q[4 * s + t][b] >> 4) & 3) << (2 * t);
        out.set[s].high[b] = static_cast<uint8_t>(h);
      }
    }
  }
  // Tile vectors 4s .. 4s + 3.
  static inline void unpack(const Packed& c, int s, __m512i w[4]) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i m30 = _mm512_set1_epi8(0x30);
    const __m512i l0 = _mm512_loadu_si512(c.set[s].low[0]);
    const __m512i l1 = _mm512_loadu_si512(c.set[s].low[1]);
    const __m512i h = _mm512_loadu_si512(c.set[s].high);
    // code = low 4 bits | (high bits moved to 4-5): A | (B & 0x30).
    w[0] = _mm512_ternarylogic_epi32(_mm512_and_si512(l0, m4), _mm512_slli_epi16(h, 4), m30, 0xf8);
    w[1] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(l0, 4), m4),
                                     _mm512_slli_epi16(h, 2), m30, 0xf8);
    w[2] = _mm512_ternarylogic_epi32(_mm512_and_si512(l1, m4), h, m30, 0xf8);
    w[3] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(l1, 4), m4),
                                     _mm512_srli_epi16(h, 2), m30, 0xf8);
  }
};

struct CompactIq4xsCodes {
  using Codes = Iq4xsCodes;
  struct Packed {
    uint8_t low[8][64];
  };
  // The byte tile holds kIq4nlValues[index] + 128; back to the index.
  static uint8_t index_of(uint8_t code) {
    for (int i = 0; i < 16; ++i)
      if (static_cast<uint8_t>(kIq4nlValues[i] + 128) == code) return static_cast<uint8_t>(i);
    return 0;  // not reached: every byte tile code comes from the table
  }
  static void pack(const TileVectors& q, Packed& out) {
    for (int p = 0; p < 8; ++p) {
      uint8_t lo[64], hi[64];
      for (int b = 0; b < 64; ++b) {
        lo[b] = index_of(q[2 * p][b]);
        hi[b] = index_of(q[2 * p + 1][b]);
      }
      pack_nibbles(lo, hi, out.low[p]);
    }
  }
  // Tile vectors 8s .. 8s + 7.
  static inline void unpack(const Packed& c, int s, __m512i w[8]) {
    const __m512i table = _mm512_xor_si512(
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues))),
        _mm512_set1_epi8(static_cast<char>(0x80)));
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    for (int p = 0; p < 4; ++p) {
      const __m512i l = _mm512_loadu_si512(c.low[4 * s + p]);
      w[2 * p] = _mm512_shuffle_epi8(table, _mm512_and_si512(l, m4));
      w[2 * p + 1] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(l, 4), m4));
    }
  }
};

// The tile format (see gemm_tile.h): 4 rows, one super-block per TileBlock, the activations
// prepared as GemmSuper prepares them.
template <typename Compact>
struct CompactSuper {
  using Codes = typename Compact::Codes;
  using Bytes = GemmSuper<Codes>;
  static constexpr int kRows = 4;
  static constexpr int64_t kBlockElems = kQKK;
  static constexpr int kGroupBlocks = 1;
  static constexpr int kMaxColumns = 4;
  static constexpr int kSets = Bytes::kSets;
  static constexpr int kSetVectors = Bytes::kSetVectors;
  using ColumnBlock = typename Bytes::ColumnBlock;

  struct TileBlock {
    f16_bits d[4];
    int8_t scales[kSets][16];
    typename Compact::Packed codes;
  };
  static_assert(sizeof(TileBlock) == sizeof(typename Compact::Packed) + 16 * kSets + 8);

  static void repack(const uint8_t* const* rows, int64_t nb, TileBlock* tile) {
    typename Bytes::Half half;
    for (int64_t i = 0; i < nb; ++i) {
      Bytes::repack_half(rows, i, half);
      TileBlock& t = tile[i];
      Compact::pack(half.q, t.codes);
      for (int s = 0; s < kSets; ++s)
        for (int l = 0; l < 16; ++l) t.scales[s][l] = static_cast<int8_t>(half.scales[s][l]);
      for (int r = 0; r < 4; ++r) t.d[r] = (reinterpret_cast<const Block*>(rows[r]) + i)->d;
    }
  }

  static void prepare(const uint8_t* act, int64_t nb, ColumnBlock* column) {
    Bytes::prepare(act, nb, column);
  }

  // The byte tiles of rows [r0, r0 + rows) (a block of Bytes::kRows = 8: two compact tiles; a
  // short block's missing half repeats the first, whose rows run stores only).
  static void expand_block(const uint8_t* tiles, int64_t stride, int64_t r0, int rows, int64_t nb,
                           typename Bytes::TileBlock* out) {
    static_assert(Bytes::kRows == 2 * kRows && Bytes::kGroupBlocks == 1);
    for (int h = 0; h < 2; ++h) {
      const int64_t first = r0 + (kRows * h < rows ? kRows * h : 0);
      const auto* t = reinterpret_cast<const TileBlock*>(tiles + first / kRows * stride);
      for (int64_t i = 0; i < nb; ++i) expand(t[i], out[i].half[h]);
    }
  }

  // Back into the byte tile (for products of many columns: unpacked once, not per column group).
  static void expand(const TileBlock& t, typename Bytes::Half& half) {
    for (int s = 0; s < kSets; ++s) {
      __m512i w[kSetVectors];
      Compact::unpack(t.codes, s, w);
      for (int j = 0; j < kSetVectors; ++j) _mm512_store_si512(half.q[s * kSetVectors + j], w[j]);
      _mm512_store_si512(half.scales[s], scales(t, s));
    }
    _mm512_store_ps(half.d, row_scales(t));
  }

  template <int N>
  static void run(const TileBlock* tile, int64_t nb, const uint8_t* const*,
                  const ColumnBlock* const* column, float* out, int64_t out_stride, int n_rows) {
    __m512 acc[N];
    for (int c = 0; c < N; ++c) acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      const TileBlock& t = tile[i];
      __m512i isum[N];
      for (int s = 0; s < kSets; ++s) {
        __m512i sum[N];
        for (int c = 0; c < N; ++c) sum[c] = broadcast16(column[c][i].start[s]);
        __m512i w[kSetVectors];
        Compact::unpack(t.codes, s, w);
        for (int j = 0; j < kSetVectors; ++j) {
          for (int c = 0; c < N; ++c) {
            sum[c] =
                _mm512_dpbusd_epi32(sum[c], w[j], broadcast16(column[c][i].q[s * kSetVectors + j]));
          }
        }
        const __m512i sc = scales(t, s);
        for (int c = 0; c < N; ++c) {
          const __m512i scaled = _mm512_mullo_epi32(sum[c], sc);
          isum[c] = s == 0 ? scaled : _mm512_add_epi32(isum[c], scaled);
        }
      }
      const __m512 d = row_scales(t);
      for (int c = 0; c < N; ++c) {
        acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[c]),
                                 _mm512_mul_ps(d, _mm512_set1_ps(column[c][i].d)), acc[c]);
      }
    }
    for (int c = 0; c < N; ++c) store_tile_rows4(acc[c], out + c * out_stride, n_rows);
  }

 private:
  using Block = typename Codes::Block;

  // Lane 4r + k: the scale of row r's sub-block 4s + k, as int32.
  static __m512i scales(const TileBlock& t, int s) {
    return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t.scales[s])));
  }
  // Lane 4r + k: row r's d.
  static __m512 row_scales(const TileBlock& t) {
    uint64_t bits;
    std::memcpy(&bits, t.d, sizeof bits);
    const __m128 d = _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(bits)));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                                 _mm512_castps128_ps512(d));
  }
};

}  // namespace

void fill_gemm_compact_avx512(KernelTable& table) {
  set_compact_kernels<CompactSuper<CompactQ6KCodes>>(table[GgmlType::Q6_K]);
  set_compact_kernels<CompactSuper<CompactIq4xsCodes>>(table[GgmlType::IQ4_XS]);
}

}  // namespace strata::quant
