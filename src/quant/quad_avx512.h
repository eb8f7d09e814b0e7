#pragma once
// Family-private: the formats of 32-element blocks with one float scale per block whose weights
// are signed bytes once decoded (Q8_0 itself, Q4_0, IQ4_NL, MXFP4), against Q8_0 activations, 4
// blocks (a quad) at a time. A quad holds 16 values of block k in 128-bit lane k of x, the other 16
// in lane k of y, and d_k in the four floats of lane k. Their single-row kernels
// (MultiQuad: vec_dot, vec_dot_multi and decode's gemv) and their tile GEMM (gemm_quad_avx512.cpp)
// run in the float order of chains_avx512.h with chain k = block k of each quad, so decode, the
// multi-row dot products and prompt processing agree bit for bit.
//
// Internal linkage on purpose (see kquants_common.h); included only by files compiled for AVX-512.

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "quant/blocks.h"
#include "quant/chains_avx512.h"
#include "quant/multi_dot.h"
#include "quant/mxfp4_common.h"

namespace strata::quant {
namespace {

// The kernels must inline into the row loop: accumulators passed by reference to an outlined copy
// would live in memory.
#define STRATA_QUAD inline __attribute__((always_inline))

constexpr int kQuadBlocks = 4;

// A load of kBytes (16, 32 or 64) kept in a register: without the empty asm, GCC re-loads the
// bytes for every permute that overwrites its copy, and these loads (most of them split across
// cache lines) are what limits a step. Bytes past kBytes are undefined and never gathered.
template <int kBytes = 64>
STRATA_QUAD __m512i load_window(const void* p) {
  __m512i v;
  if constexpr (kBytes == 16) {
    v = _mm512_castsi128_si512(_mm_loadu_si128(static_cast<const __m128i*>(p)));
  } else if constexpr (kBytes == 32) {
    v = _mm512_castsi256_si512(_mm256_loadu_si256(static_cast<const __m256i*>(p)));
  } else {
    static_assert(kBytes == 64);
    v = _mm512_loadu_si512(p);
  }
  __asm__("" : "+v"(v));
  return v;
}

struct WordIndex {
  alignas(64) uint16_t v[32];
  __m512i load() const { return _mm512_load_si512(v); }
};

// 128-bit lane k of x holds elements 0..15 of block k, of y elements 16..31.
struct Quad {
  __m512i x, y;
  __m512 d;  // d of block k in the four floats of 128-bit lane k
};

// ---- Q8_0 ------------------------------------------------------------------------------------
// From loads of [0,64), [64,128) and [120,136) of the 136-byte quad (the same cache lines and
// splits as one pass over it):
//   x: block 0 bytes 2..17, block 1 36..51, block 2 70..85, block 3 104..119 ([0,64), [64,128));
//   y: block 0 18..33, block 1 52..67, block 2 86..101, block 3 120..135 ([0,64) with its first
//      16 bytes replaced by [120,136), and [64,128)).

// Word indices of four runs of 16 bytes, at quad bytes b0..b3, into the 128 bytes of two loads:
// `pos(byte)` maps a quad byte to its byte position there.
template <typename Pos>
constexpr WordIndex q8_0_quad_index(Pos pos, int b0, int b1, int b2, int b3) {
  const int start[kQuadBlocks] = {b0, b1, b2, b3};
  WordIndex idx{};
  for (int k = 0; k < kQuadBlocks; ++k) {
    for (int j = 0; j < 8; ++j) idx.v[8 * k + j] = static_cast<uint16_t>(pos(start[k] + 2 * j) / 2);
  }
  return idx;
}

// `u`, `v`: the quad's bytes [0,64) and [64,128); `last`: [120,136) in the low 128 bits.
STRATA_QUAD Quad q8_0_quad(__m512i u, __m512i v, __m128i last) {
  constexpr int kBytes = sizeof(BlockQ8_0);
  static constexpr WordIndex kX =
      q8_0_quad_index([](int b) { return b; }, 2, kBytes + 2, 2 * kBytes + 2, 3 * kBytes + 2);
  static constexpr WordIndex kY =
      q8_0_quad_index([](int b) { return b >= 4 * kBytes - 16 ? b - (4 * kBytes - 16) : b; }, 18,
                      kBytes + 18, 2 * kBytes + 18, 3 * kBytes + 18);
  static constexpr WordIndex kD = [] {
    WordIndex idx{};
    for (int j = 0; j < 16; ++j) idx.v[j] = static_cast<uint16_t>((j / 4) * kBytes / 2);
    return idx;
  }();
  Quad q;
  q.x = _mm512_permutex2var_epi16(u, kX.load(), v);
  q.y = _mm512_permutex2var_epi16(_mm512_inserti32x4(u, last, 0), kY.load(), v);
  q.d = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutex2var_epi16(u, kD.load(), v)));
  return q;
}

// The Q8_0 blocks of weights and activations.
struct Q8_0Quads {
  static constexpr int64_t kBlockBytes = sizeof(BlockQ8_0);
  static constexpr int kOffset = 0;  // signed bytes
  static STRATA_QUAD Quad quad(const uint8_t* p) {
    return q8_0_quad(load_window(p), load_window(p + 64),
                     _mm512_castsi512_si128(load_window<16>(p + 4 * kBlockBytes - 16)));
  }
  // The first `blocks` (< 4) blocks at p and zero blocks after them (masked loads: nothing past
  // the row is read). A zero block has S = 0 and d = 0, which leaves its float chain unchanged (a
  // chain is never -0).
  static STRATA_QUAD Quad partial(const uint8_t* p, int64_t blocks) {
    const int64_t bytes = blocks * kBlockBytes;
    const auto mask = [&](int64_t offset) {
      const int64_t n = std::max<int64_t>(0, bytes - offset);
      return n >= 64 ? ~__mmask64{0} : (__mmask64{1} << n) - 1;
    };
    // At most 3 blocks (102 bytes): nothing at [120,136).
    return q8_0_quad(_mm512_maskz_loadu_epi8(mask(0), p), _mm512_maskz_loadu_epi8(mask(64), p + 64),
                     _mm_setzero_si128());
  }
};

// ---- 4-bit codes -------------------------------------------------------------------------------
// A block's 16 code bytes at kQsOffset hold element j in the low and j + 16 in the high nibble.
// Decoded, a value is an unsigned byte code = value + kOffset: the nibble itself (Q4_0) or a table
// lookup (IQ4_NL, MXFP4: the signed value plus 128).

struct Q4_0Values {
  static constexpr int64_t kBlockBytes = sizeof(BlockQ4_0);
  static constexpr int64_t kQsOffset = offsetof(BlockQ4_0, qs);
  static constexpr int kOffset = 8;
  static f16_bits half_scale(const uint8_t* p) {
    f16_bits d;
    std::memcpy(&d, p, sizeof d);
    return d;
  }
};

// kIq4nlValues / kMxfp4Values plus 128.
inline __m128i offset_table(const int8_t* values) {
  return _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values)),
                       _mm_set1_epi8(static_cast<char>(0x80)));
}

struct Iq4nlValues : Q4_0Values {
  static_assert(sizeof(BlockIQ4_NL) == sizeof(BlockQ4_0) &&
                offsetof(BlockIQ4_NL, qs) == offsetof(BlockQ4_0, qs));
  static constexpr int kOffset = 128;
  static __m128i table() { return offset_table(kIq4nlValues); }
};

// e8m0_half (mxfp4_common.h) of every int32 lane of e (0..255), exactly.
inline __m512 e8m0_half_lanes(__m512i e) {
  const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
  const __m512i subnormal = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
  const __mmask16 small = _mm512_cmplt_epi32_mask(e, _mm512_set1_epi32(2));
  return _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, normal, subnormal));
}

struct Mxfp4Values {
  static constexpr int64_t kBlockBytes = kMxfp4Bytes;
  static constexpr int64_t kQsOffset = kMxfp4QsOffset;
  static constexpr int kOffset = 128;
  static __m128i table() { return offset_table(kMxfp4Values); }
  static float scale(const uint8_t* p) { return e8m0_half(p[0]); }
  // e8m0_half of block k of the quad at p in the four floats of 128-bit lane k (the layout of
  // Quad::d), from one load: the scale of block k, byte 17k, is byte k of the window's lane k.
  static __m512 lane_scales(const uint8_t* p) {
    static_assert(kBlockBytes == 17);
    static constexpr WordIndex kIndex = [] {
      // Byte pairs (k, none) then (none, none): each dword of lane k is byte k, zero-extended.
      WordIndex idx{};
      for (int k = 0; k < kQuadBlocks; ++k)
        for (int j = 0; j < 4; ++j) {
          idx.v[8 * k + 2 * j] = static_cast<uint16_t>(0x8000 | k);
          idx.v[8 * k + 2 * j + 1] = 0x8080;
        }
      return idx;
    }();
    return e8m0_half_lanes(_mm512_shuffle_epi8(load_window(p), kIndex.load()));
  }
};

template <typename Values>
struct NibbleQuads {
  static constexpr int64_t kBlockBytes = Values::kBlockBytes;
  static constexpr int kOffset = Values::kOffset;

  static STRATA_QUAD float scale(const uint8_t* p) {
    if constexpr (requires { Values::scale(p); }) {
      return Values::scale(p);
    } else {
      return _cvtsh_ss(Values::half_scale(p));
    }
  }
  // d_k of 4 blocks in the four floats of 128-bit lane k.
  static STRATA_QUAD __m512 lanes(__m128 d) {
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                                 _mm512_castps128_ps512(d));
  }
  // Codes of 4 blocks (lane k: block k) and their scales (d: in Quad::d's layout); lanes at or
  // past `blocks` are zero blocks (value 0, scale 0).
  static STRATA_QUAD Quad lookup(__m512i q, __m512 d, int blocks) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512i lo = _mm512_and_si512(q, m4);
    __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
    if constexpr (requires { Values::table(); }) {
      const __m512i table = _mm512_broadcast_i32x4(Values::table());
      lo = _mm512_shuffle_epi8(table, lo);
      hi = _mm512_shuffle_epi8(table, hi);
    }
    if (blocks < kQuadBlocks) {
      const __mmask16 real = static_cast<__mmask16>((1u << (4 * blocks)) - 1);
      const __m512i zero = _mm512_set1_epi8(static_cast<char>(kOffset));
      lo = _mm512_mask_mov_epi32(zero, real, lo);
      hi = _mm512_mask_mov_epi32(zero, real, hi);
    }
    Quad out;
    out.x = lo;
    out.y = hi;
    out.d = d;
    return out;
  }
  static STRATA_QUAD __m128i codes(const uint8_t* block) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + Values::kQsOffset));
  }
  static STRATA_QUAD Quad quad(const uint8_t* p) {
    if constexpr (requires { Values::half_scale(p); }) {
      static_assert(kBlockBytes == 18 && Values::kQsOffset == 2);
      return quad18(p);
    } else {
      const __m512i q = _mm512_inserti64x4(
          _mm512_castsi256_si512(
              _mm256_inserti128_si256(_mm256_castsi128_si256(codes(p)), codes(p + kBlockBytes), 1)),
          _mm256_inserti128_si256(_mm256_castsi128_si256(codes(p + 2 * kBlockBytes)),
                                  codes(p + 3 * kBlockBytes), 1),
          1);
      return lookup(q, Values::lane_scales(p), kQuadBlocks);
    }
  }
  // 18-byte blocks (f16 scale, then the codes): all fields of the quad's 72 bytes gathered with
  // word permutes from loads of [0,64) and [56,72).
  static STRATA_QUAD Quad quad18(const uint8_t* p) {
    constexpr auto word = [](int byte) {
      return static_cast<uint16_t>(byte < 64 ? byte / 2 : 32 + (byte - 56) / 2);
    };
    static constexpr WordIndex kCodes = [&] {
      WordIndex idx{};
      for (int k = 0; k < kQuadBlocks; ++k)
        for (int j = 0; j < 8; ++j) idx.v[8 * k + j] = word(18 * k + 2 + 2 * j);
      return idx;
    }();
    static constexpr WordIndex kScales = [&] {
      WordIndex idx{};
      for (int k = 0; k < kQuadBlocks; ++k) idx.v[k] = word(18 * k);
      return idx;
    }();
    const __m512i u = load_window(p);
    const __m512i v = load_window<16>(p + 56);
    const __m512i q = _mm512_permutex2var_epi16(u, kCodes.load(), v);
    const __m128 d =
        _mm_cvtph_ps(_mm512_castsi512_si128(_mm512_permutex2var_epi16(u, kScales.load(), v)));
    return lookup(q, lanes(d), kQuadBlocks);
  }
  // The first `blocks` (1..3) blocks at p and zero blocks after them; nothing past them is read.
  static STRATA_QUAD Quad partial(const uint8_t* p, int64_t blocks) {
    alignas(16) float d[kQuadBlocks] = {scale(p), 0.0f, 0.0f, 0.0f};
    __m512i q = _mm512_zextsi128_si512(codes(p));
    if (blocks > 1) {
      q = _mm512_inserti32x4(q, codes(p + kBlockBytes), 1);
      d[1] = scale(p + kBlockBytes);
    }
    if (blocks > 2) {
      q = _mm512_inserti32x4(q, codes(p + 2 * kBlockBytes), 2);
      d[2] = scale(p + 2 * kBlockBytes);
    }
    return lookup(q, lanes(_mm_load_ps(d)), static_cast<int>(blocks));
  }
};

// ---- single-row kernels ------------------------------------------------------------------------

// kOffset 0: signed values, dotted as |w| times (a with the sign of w); else unsigned codes
// (value + kOffset), dotted as code times a minus kOffset * a.
template <int kOffset>
struct QuadStep {
  struct Decoded {
    __m512i x, y;  // |w| (signed values) or the codes
    __mmask64 neg_x, neg_y;
    __m512 d;
  };
  static STRATA_QUAD Decoded decode(const Quad& q) {
    if constexpr (kOffset == 0) {
      return {_mm512_abs_epi8(q.x), _mm512_abs_epi8(q.y), _mm512_movepi8_mask(q.x),
              _mm512_movepi8_mask(q.y), q.d};
    } else {
      return {q.x, q.y, 0, 0, q.d};
    }
  }
  // kOffset times the activation quad's values, summed as dot() sums the products: the term the
  // codes' offset adds, which depends on the activation alone.
  static STRATA_QUAD __m512i offset_sums(const Quad& a) {
    const __m512i offset = _mm512_set1_epi8(static_cast<char>(kOffset));
    const __m512i zero = _mm512_setzero_si512();
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, offset, a.x), offset, a.y);
  }
  // Exact int32: 4 partial sums of block k in 128-bit lane k. No side is ever -128 (activations
  // are in -127..127, and so are the decoded values). `sums`: a's offset_sums computed ahead
  // (decode's GEMV, which meets each activation quad once per row), or null.
  static STRATA_QUAD __m512i dot(const Decoded& w, const Quad& a, const __m512i* sums = nullptr) {
    const __m512i zero = _mm512_setzero_si512();
    if constexpr (kOffset == 0) {
      const __m512i ax = _mm512_mask_sub_epi8(a.x, w.neg_x, zero, a.x);
      const __m512i ay = _mm512_mask_sub_epi8(a.y, w.neg_y, zero, a.y);
      return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, w.x, ax), w.y, ay);
    } else {
      const __m512i s = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, w.x, a.x), w.y, a.y);
      return _mm512_sub_epi32(s, sums ? *sums : offset_sums(a));
    }
  }
  // One quad into acc; float lane 4k carries the chain of block k.
  static STRATA_QUAD void column(const Decoded& w, const Quad& a, __m512& acc,
                                 const __m512i* sums = nullptr) {
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lane_totals(dot(w, a, sums))), _mm512_mul_ps(w.d, a.d),
                          acc);
  }
  // Two consecutive quads, sharing the horizontal sums: the same integers and float operations as
  // two calls of column().
  static STRATA_QUAD void column2(const Decoded& w0, const Quad& a0, const Decoded& w1,
                                  const Quad& a1, __m512& acc, const __m512i* sums0 = nullptr,
                                  const __m512i* sums1 = nullptr) {
    const __m512i s0 = dot(w0, a0, sums0), s1 = dot(w1, a1, sums1);
    // Per 128-bit lane: [quad 0 x2, quad 1 x2] partial sums, then whole sums.
    const __m512i u =
        _mm512_add_epi32(_mm512_unpacklo_epi64(s0, s1), _mm512_unpackhi_epi64(s0, s1));
    const __m512 f =
        _mm512_cvtepi32_ps(_mm512_add_epi32(u, _mm512_shuffle_epi32(u, _MM_PERM_CDAB)));
    acc = _mm512_fmadd_ps(f, _mm512_mul_ps(w0.d, a0.d), acc);
    acc = _mm512_fmadd_ps(_mm512_shuffle_ps(f, f, _MM_SHUFFLE(3, 2, 3, 2)),
                          _mm512_mul_ps(w1.d, a1.d), acc);
  }
};

// vec_dot (one column) and vec_dot_multi of a quad format against Q8_0 activations: each weight
// quad decoded once for all columns.
template <typename Weights>
struct MultiQuad {
  using Step = QuadStep<Weights::kOffset>;
  template <int N>
  static void run(int64_t n, const void* weights, const uint8_t* act, int64_t stride, float* out) {
    const auto* w = static_cast<const uint8_t*>(weights);
    constexpr int64_t kW = Weights::kBlockBytes, kA = sizeof(BlockQ8_0);
    const int64_t nb = n / kQK;
    const int64_t full = nb - nb % kQuadBlocks;
    __m512 acc[N];
    for (int j = 0; j < N; ++j) acc[j] = _mm512_setzero_ps();
    const auto a = [&](int j, int64_t block) { return act + j * stride + block * kA; };
    int64_t i = 0;
    for (; i + 2 * kQuadBlocks <= full; i += 2 * kQuadBlocks) {
      const auto x0 = Step::decode(Weights::quad(w + i * kW));
      const auto x1 = Step::decode(Weights::quad(w + (i + kQuadBlocks) * kW));
      for (int j = 0; j < N; ++j) {
        Step::column2(x0, Q8_0Quads::quad(a(j, i)), x1, Q8_0Quads::quad(a(j, i + kQuadBlocks)),
                      acc[j]);
      }
    }
    if (i < full) {
      const auto x = Step::decode(Weights::quad(w + i * kW));
      for (int j = 0; j < N; ++j) Step::column(x, Q8_0Quads::quad(a(j, i)), acc[j]);
    }
    if (full < nb) {
      const auto x = Step::decode(Weights::partial(w + full * kW, nb - full));
      for (int j = 0; j < N; ++j)
        Step::column(x, Q8_0Quads::partial(a(j, full), nb - full), acc[j]);
    }
    for (int j = 0; j < N; ++j) out[j] = finish_chains(acc[j]);
  }

  // One activation row against `rows` weight rows (decode's GEMV): the activation's quads (and
  // for codes with an offset, the offset's sums) are computed once per call instead of once per
  // row, where they cost as much as decoding the weights. Each row runs the integers and float
  // operations of run<1> in its order, so out[r] equals vec_dot of row r bit for bit. Rows go one
  // at a time: two rows interleaved (sharing the activation loads) made gpt-oss-shaped decode
  // 25-35% slower on a Zen 4, whose prefetchers follow one stream from RAM better than two.
  static void gemv(int64_t n, const void* weights, int64_t row_stride, int64_t rows,
                   const void* activations, float* out) {
    if (rows <= 0) return;
    constexpr int64_t kA = sizeof(BlockQ8_0);
    const auto* act = static_cast<const uint8_t*>(activations);
    const int64_t nb = n / kQK;
    const int64_t full = nb - nb % kQuadBlocks;
    const int64_t n_quads = (nb + kQuadBlocks - 1) / kQuadBlocks;
    GemvQuad* a = gemv_scratch<GemvQuad>(n_quads);
    for (int64_t q = 0; q < n_quads; ++q) {
      a[q].quad = q * kQuadBlocks < full ? Q8_0Quads::quad(act + q * kQuadBlocks * kA)
                                         : Q8_0Quads::partial(act + full * kA, nb - full);
      if constexpr (kHasOffset) a[q].sums = Step::offset_sums(a[q].quad);
    }
    const auto* w = static_cast<const uint8_t*>(weights);
    for (int64_t r = 0; r < rows; ++r) out[r] = gemv_row(nb, w + r * row_stride, a);
  }

 private:
  static constexpr bool kHasOffset = Weights::kOffset != 0;
  struct GemvQuad {
    Quad quad;
    __m512i sums;  // Step::offset_sums(quad) where the codes have an offset
  };
  static STRATA_QUAD const __m512i* sums(const GemvQuad& a) {
    return kHasOffset ? &a.sums : nullptr;
  }

  // One weight row against the decoded activation quads a.
  static STRATA_QUAD float gemv_row(int64_t nb, const uint8_t* w, const GemvQuad* a) {
    constexpr int64_t kW = Weights::kBlockBytes;
    const int64_t full = nb - nb % kQuadBlocks;
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 2 * kQuadBlocks <= full; i += 2 * kQuadBlocks) {
      const GemvQuad& a0 = a[i / kQuadBlocks];
      const GemvQuad& a1 = a[i / kQuadBlocks + 1];
      Step::column2(Step::decode(Weights::quad(w + i * kW)), a0.quad,
                    Step::decode(Weights::quad(w + (i + kQuadBlocks) * kW)), a1.quad, acc, sums(a0),
                    sums(a1));
    }
    if (i < full) {
      const GemvQuad& a0 = a[i / kQuadBlocks];
      Step::column(Step::decode(Weights::quad(w + i * kW)), a0.quad, acc, sums(a0));
    }
    if (full < nb) {
      const GemvQuad& a0 = a[full / kQuadBlocks];
      Step::column(Step::decode(Weights::partial(w + full * kW, nb - full)), a0.quad, acc,
                   sums(a0));
    }
    return finish_chains(acc);
  }
};

#undef STRATA_QUAD

}  // namespace
}  // namespace strata::quant
