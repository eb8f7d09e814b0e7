// Compact tiles of Q6_K and IQ4_XS (TypeKernels::compact): the 4-row tiles of GemmSuper
// (gemm_super_avx512.h) with their codes and scales kept at the format's own width, so that a tile
// takes exactly the bytes of its rows (rewritten in place: ops/compact_tiles.h). The byte tiles
// are 1.6x (Q6_K) and 1.9x (IQ4_XS) the rows' size, which a decode GEMV streaming from RAM pays
// for; the compact tiles are unpacked in registers (2-3 instructions per 64 codes) right before
// their vpdpbusd. The integer sums and float operations are those of GemmSuper, hence of vec_dot
// (chains_avx512.h): the same bits on every path.
//
// Tile of 4 rows and one super-block (tile vector m = the byte tile's q[m]; a set's scales in
// lane 4r + k: row r, sub-block 4 set + k):
//   Q6_K (840 bytes = 4 x 210): the rows' f16 d, int8 scales, then per set s: low[p] = low 4 bits
//     of m = 4s + 2p (low nibble) and 4s + 2p + 1 (high nibble), high = bits 4-5 of m = 4s + t
//     at bits 2t, 2t + 1;
//   IQ4_XS (544 bytes = 4 x 136): the rows' f16 d, the scales at 6 bits (SixBitScales), then
//     low[p] = table indices of m = 2p and 2p + 1.

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

// Int8 scales as they are (Q6_K keeps 16 of them per row).
template <int kSets>
struct ByteScales {
  int8_t v[kSets][16];
  static void pack(const int32_t (&in)[kSets][16], ByteScales& out) {
    for (int s = 0; s < kSets; ++s)
      for (int l = 0; l < 16; ++l) out.v[s][l] = static_cast<int8_t>(in[s][l]);
  }
  static void unpack(const ByteScales& in, __m512i (&out)[kSets]) {
    for (int s = 0; s < kSets; ++s)
      out[s] = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in.v[s])));
  }
};

// 32 scales of -32..31 (IQ4_XS: 4 rows x 8 sub-blocks) at 6 bits, u = scale + 32 of the set-major
// order (set s, lane l: u[16s + l]): low[b] = low 4 bits of u[b] and u[b + 16] (nibbles), high[b]
// = bits 4-5 of u[b + 8k] at bits 2k, 2k + 1.
struct SixBitScales {
  uint8_t low[16];
  uint8_t high[8];
  static void pack(const int32_t (&in)[2][16], SixBitScales& out) {
    uint8_t u[32];
    for (int i = 0; i < 32; ++i) u[i] = static_cast<uint8_t>(in[i / 16][i % 16] + 32);
    pack_six_bits<32>(u, out.low, out.high);
  }
  static void unpack(const SixBitScales& in, __m512i (&out)[2]) {
    const __m256i low =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in.low)));
    const __m256i nibbles =
        _mm256_and_si256(_mm256_mask_srli_epi16(low, 0xff00, low, 4), _mm256_set1_epi8(0x0f));
    uint64_t high_bits;
    std::memcpy(&high_bits, in.high, sizeof high_bits);
    // Qword k takes bits 2k, 2k + 1 of every byte, moved to bits 4-5.
    const __m256i high = _mm256_srlv_epi16(
        _mm256_set1_epi64x(static_cast<long long>(high_bits)),
        _mm256_setr_epi64x(0, 0x0002000200020002, 0x0004000400040004, 0x0006000600060006));
    const __m256i u = _mm256_ternarylogic_epi32(nibbles, _mm256_slli_epi16(high, 4),
                                                _mm256_set1_epi8(0x30), 0xf8);
    const __m256i v = _mm256_sub_epi8(u, _mm256_set1_epi8(32));
    out[0] = _mm512_cvtepi8_epi32(_mm256_castsi256_si128(v));
    out[1] = _mm512_cvtepi8_epi32(_mm256_extracti128_si256(v, 1));
  }
};

struct CompactQ6KCodes {
  using Codes = Q6KCodes;
  using Scales = ByteScales<4>;
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
  using Scales = SixBitScales;
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

  using Scales = typename Compact::Scales;
  struct TileBlock {
    f16_bits d[4];
    Scales scales;
    typename Compact::Packed codes;
  };
  static_assert(sizeof(TileBlock) == 8 + sizeof(Scales) + sizeof(typename Compact::Packed));

  static void repack(const uint8_t* const* rows, int64_t nb, TileBlock* tile) {
    typename Bytes::Half half;
    for (int64_t i = 0; i < nb; ++i) {
      Bytes::repack_half(rows, i, half);
      TileBlock& t = tile[i];
      Compact::pack(half.q, t.codes);
      Scales::pack(half.scales, t.scales);
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
    __m512i sc[kSets];
    Scales::unpack(t.scales, sc);
    for (int s = 0; s < kSets; ++s) {
      __m512i w[kSetVectors];
      Compact::unpack(t.codes, s, w);
      for (int j = 0; j < kSetVectors; ++j) _mm512_store_si512(half.q[s * kSetVectors + j], w[j]);
      _mm512_store_si512(half.scales[s], sc[s]);
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
      __m512i sc[kSets];
      Scales::unpack(t.scales, sc);
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
        for (int c = 0; c < N; ++c) {
          const __m512i scaled = _mm512_mullo_epi32(sum[c], sc[s]);
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
