// Compact tiles of the quad formats (TypeKernels::compact): Q8_0, Q4_0, IQ4_NL and MXFP4 in 4-row
// tiles laid out as a half of GemmQuad's byte tiles (gemm_quad_avx512.h) reads them, with the
// codes and scales kept as the blocks store them, in exactly the bytes of the 4 rows. A quad's
// tile vector m (128-bit lane r = row r, dword k = block k) is then one load of the rows' own
// code bytes: nibble formats keep elements 4m..4m+3 and 16 + 4m..16 + 4m + 3 in one byte each,
// split by a mask and a shift (and a table lookup for IQ4_NL and MXFP4); Q8_0 only flips the
// sign bit. The integer sums and float operations are GemmQuad's, hence vec_dot's.
//
// Tile of 4 rows, per quad of 4 blocks: the 16 scales as stored (f16, or MXFP4's E8M0 byte; lane
// 4r + k), then the code vectors (4 of nibbles, 8 of Q8_0 bytes). A row whose block count is not a
// multiple of 4 ends in a short quad of `rem` blocks: its scales (row-major, rem per row) and each
// code vector with only the rem dwords of every lane, packed (_mm512_maskz_expandloadu_epi32
// spreads them back, the missing blocks zero with scale 0, as GemmQuad's partial quads).

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "quant/gemm_avx512.h"
#include "quant/gemm_quad_avx512.h"
#include "quant/kernel_table.h"
#include "quant/mxfp4_common.h"

namespace strata::quant {
namespace {

// Scales as the blocks store them, 16 at a time into lanes 4r + k.
struct F16Scales {
  static constexpr int kBytes = 2;
  static __m512 lanes(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
};
struct E8m0Scales {
  static constexpr int kBytes = 1;
  static __m512 lanes(const uint8_t* p) {
    return e8m0_half_lanes(
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
};

// Code vectors of a quad: kVectors loads of 64 bytes (lane r, dword k: the bytes of row r, block
// k, at kQsOffset + 4 v) become GemmQuad's 8 tile vectors (values plus 128).
template <typename Values>
struct NibbleCodes {
  static constexpr int kVectors = 4;
  static constexpr int64_t kQsOffset = Values::kQsOffset;
  static void tile_vectors(const __m512i (&v)[kVectors], __m512i (&w)[8]) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    for (int m = 0; m < 4; ++m) {
      __m512i lo = _mm512_and_si512(v[m], m4);
      __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v[m], 4), m4);
      if constexpr (requires { Values::table(); }) {
        const __m512i table = _mm512_broadcast_i32x4(Values::table());
        lo = _mm512_shuffle_epi8(table, lo);
        hi = _mm512_shuffle_epi8(table, hi);
      } else {  // the nibble is value + kOffset
        const __m512i offset = _mm512_set1_epi8(static_cast<char>(128 - Values::kOffset));
        lo = _mm512_add_epi8(lo, offset);
        hi = _mm512_add_epi8(hi, offset);
      }
      w[m] = lo;
      w[m + 4] = hi;
    }
  }
};
struct Q8_0Codes {
  static constexpr int kVectors = 8;
  static constexpr int64_t kQsOffset = kQ8_0QsOffset;
  static void tile_vectors(const __m512i (&v)[kVectors], __m512i (&w)[8]) {
    for (int m = 0; m < 8; ++m) w[m] = _mm512_xor_si512(v[m], _mm512_set1_epi8(-128));
  }
};

template <typename Weights, typename Codes, typename Scales>
struct CompactQuad {
  using Bytes = GemmQuad<Weights>;
  static constexpr int kRows = 4;
  static constexpr int64_t kBlockElems = kQK;
  // The tile driver counts blocks (a TileBlock holds a quad): run gets the block count, which
  // says how long the last quad is.
  static constexpr int kGroupBlocks = 1;
  static constexpr int kMaxColumns = Bytes::kMaxColumns;
  static constexpr int64_t kBlockBytes = Weights::kBlockBytes;
  using ColumnBlock = typename Bytes::ColumnBlock;
  static constexpr int kScaleBytes = 16 * Scales::kBytes;
  static constexpr int kQuadBytes = kScaleBytes + 64 * Codes::kVectors;
  static_assert(kQuadBytes == 4 * kQuadBlocks * kBlockBytes);
  // The driver's tile pointer; the bytes follow the layout above.
  struct TileBlock {
    uint8_t bytes[kQuadBytes];
  };

  static int64_t tile_bytes(int64_t n) { return n / kBlockElems * kRows * kBlockBytes; }

  static void repack(const uint8_t* const* rows, int64_t nb, TileBlock* tile) {
    auto* out = reinterpret_cast<uint8_t*>(tile);
    for (int64_t i = 0; i < nb; i += kQuadBlocks) {
      const int blocks = static_cast<int>(std::min<int64_t>(kQuadBlocks, nb - i));
      uint8_t* scales = out;
      uint8_t* codes = out + kRows * blocks * Scales::kBytes;
      for (int r = 0; r < kRows; ++r) {
        for (int k = 0; k < blocks; ++k) {
          const uint8_t* block = rows[r] + (i + k) * kBlockBytes;
          std::memcpy(scales + (r * blocks + k) * Scales::kBytes, block, Scales::kBytes);
          for (int v = 0; v < Codes::kVectors; ++v) {
            std::memcpy(codes + v * 16 * blocks + (r * blocks + k) * 4,
                        block + Codes::kQsOffset + 4 * v, 4);
          }
        }
      }
      out += kRows * blocks * kBlockBytes;
    }
  }

  static void prepare(const uint8_t* act, int64_t nb, ColumnBlock* column) {
    Bytes::prepare(act, nb, column);
  }

  // GemmQuad's tile vectors and scales of the quad at p with `blocks` blocks.
  static void decode(const uint8_t* p, int blocks, __m512i (&w)[8], __m512& d) {
    __m512i v[Codes::kVectors];
    if (blocks == kQuadBlocks) {
      d = Scales::lanes(p);
      for (int m = 0; m < Codes::kVectors; ++m) v[m] = _mm512_loadu_si512(p + kScaleBytes + 64 * m);
    } else {
      const __mmask16 real = static_cast<__mmask16>(0x1111u * ((1u << blocks) - 1));
      alignas(64) uint8_t scales[kScaleBytes] = {};
      for (int r = 0; r < kRows; ++r) {
        std::memcpy(scales + 4 * r * Scales::kBytes, p + r * blocks * Scales::kBytes,
                    static_cast<size_t>(blocks * Scales::kBytes));
      }
      d = _mm512_maskz_mov_ps(real, Scales::lanes(scales));
      const uint8_t* codes = p + kRows * blocks * Scales::kBytes;
      for (int m = 0; m < Codes::kVectors; ++m)
        v[m] = _mm512_maskz_expandloadu_epi32(real, codes + m * 16 * blocks);
    }
    Codes::tile_vectors(v, w);
  }

  template <int N>
  static void run(const TileBlock* tile, int64_t nb, const uint8_t* const*,
                  const ColumnBlock* const* column, float* out, int64_t out_stride, int n_rows) {
    const auto* p = reinterpret_cast<const uint8_t*>(tile);
    __m512 acc[N];
    for (int c = 0; c < N; ++c) acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i += kQuadBlocks) {
      const int blocks = static_cast<int>(std::min<int64_t>(kQuadBlocks, nb - i));
      const int64_t g = i / kQuadBlocks;
      __m512i w[8];
      __m512 d;
      decode(p, blocks, w, d);
      p += kRows * blocks * kBlockBytes;
      __m512i sum[N];
      for (int c = 0; c < N; ++c) sum[c] = broadcast16(column[c][g].start);
      for (int m = 0; m < 8; ++m) {
        for (int c = 0; c < N; ++c)
          sum[c] = _mm512_dpbusd_epi32(sum[c], w[m], broadcast16(column[c][g].q[m]));
      }
      for (int c = 0; c < N; ++c) {
        const __m512 da = _mm512_broadcast_f32x4(_mm_load_ps(column[c][g].d));
        acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[c]), _mm512_mul_ps(d, da), acc[c]);
      }
    }
    for (int c = 0; c < N; ++c) store_tile_rows4(acc[c], out + c * out_stride, n_rows);
  }

  // GemmQuad's byte tiles of rows [r0, r0 + rows): two compact tiles (a short block's missing
  // half repeats the first, whose rows run stores only).
  static void expand_block(const uint8_t* tiles, int64_t stride, int64_t r0, int rows, int64_t nb,
                           typename Bytes::TileBlock* out) {
    static_assert(Bytes::kRows == 2 * kRows);
    for (int h = 0; h < 2; ++h) {
      const int64_t first = r0 + (kRows * h < rows ? kRows * h : 0);
      const uint8_t* p = tiles + first / kRows * stride;
      for (int64_t i = 0; i < nb; i += kQuadBlocks) {
        const int blocks = static_cast<int>(std::min<int64_t>(kQuadBlocks, nb - i));
        typename Bytes::Half& half = out[i / kQuadBlocks].half[h];
        __m512i w[8];
        __m512 d;
        decode(p, blocks, w, d);
        p += kRows * blocks * kBlockBytes;
        for (int m = 0; m < 8; ++m) _mm512_store_si512(half.q[m], w[m]);
        _mm512_store_ps(half.d, d);
      }
    }
  }
};

template <typename Values>
using CompactNibbleQuad =
    CompactQuad<NibbleQuads<Values>, NibbleCodes<Values>,
                std::conditional_t<std::is_same_v<Values, Mxfp4Values>, E8m0Scales, F16Scales>>;

}  // namespace

void fill_gemm_compact_quads_avx512(KernelTable& table) {
  set_compact_kernels<CompactQuad<Q8_0Quads, Q8_0Codes, F16Scales>>(table[GgmlType::Q8_0]);
  set_compact_kernels<CompactNibbleQuad<Q4_0Values>>(table[GgmlType::Q4_0]);
  set_compact_kernels<CompactNibbleQuad<Iq4nlValues>>(table[GgmlType::IQ4_NL]);
  set_compact_kernels<CompactNibbleQuad<Mxfp4Values>>(table[GgmlType::MXFP4]);
}

}  // namespace strata::quant
