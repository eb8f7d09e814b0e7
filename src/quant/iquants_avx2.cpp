// AVX2 + FMA kernels of IQ4_NL (activations Q8_0) and IQ4_XS (activations Q8_K): the 4-bit
// indices become signed values through a _mm256_shuffle_epi8 table lookup, and signed x signed
// products go through _mm256_maddubs_epi16 with the sign trick (|w| times a carrying the sign of
// w). |w| <= 127 and |a| <= 127, so the 16-bit pair sums never saturate (the activation quantizers
// never produce -128). Also dequantization of both types.

#include <immintrin.h>

#include "quant/avx2_common.h"
#include "quant/iq4xs_scales.h"
#include "quant/kernel_table.h"
#include "quant/kquants_common.h"
#include "quant/multi_dot.h"

namespace strata::quant {
namespace {

// Two 16-byte pieces as one 256-bit vector.
inline __m256i load2x128(const void* lo, const void* hi) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(load128(lo)), load128(hi), 1);
}

inline __m256i value_table() {
  return _mm256_broadcastsi128_si256(load128(kIq4nlValues));
}

// sum of pairs of w * a (int16), w and a signed.
inline __m256i mul_signed(__m256i w, __m256i a) {
  return _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
}

// Byte-shuffle masks over a vector whose two lanes hold the same eight int16: the low lane
// becomes value 2k, the high lane value 2k + 1.
struct PairMasks {
  alignas(32) uint8_t m[4][32];
};
constexpr PairMasks make_pair_masks() {
  PairMasks p{};
  for (int k = 0; k < 4; ++k) {
    for (int b = 0; b < 32; ++b) p.m[k][b] = static_cast<uint8_t>(2 * (2 * k + b / 16) + b % 2);
  }
  return p;
}
constexpr PairMasks kPairMasks = make_pair_masks();

// ---------------------------------------------------------------------------------------------
// Dot products.

float vec_dot_iq4nl(int64_t n, const void* w, const void* act) {
  const auto* x = static_cast<const BlockIQ4_NL*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(act);
  const __m256i table = value_table();
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  const int64_t nb = n / kQK;
  auto block = [&](int64_t i) {
    const __m128i q = load128(x[i].qs);
    const __m256i idx = _mm256_and_si256(
        _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1), m4);
    const __m256i s =
        _mm256_madd_epi16(mul_signed(_mm256_shuffle_epi8(table, idx), load256(y[i].qs)), ones);
    return _mm256_mul_ps(_mm256_set1_ps(f16_to_f32(x[i].d) * f16_to_f32(y[i].d)),
                         _mm256_cvtepi32_ps(s));
  };
  int64_t i = 0;
  for (; i + 1 < nb; i += 2) {
    acc0 = _mm256_add_ps(acc0, block(i));
    acc1 = _mm256_add_ps(acc1, block(i + 1));
  }
  if (i < nb) acc0 = _mm256_add_ps(acc0, block(i));
  return hsum(_mm256_add_ps(acc0, acc1));
}

// An activation super-block in the order the IQ4_XS codes meet it: for sub-blocks 2p and 2p + 1,
// lo[p] holds the elements of the low nibbles (0..15 of each), hi[p] of the high ones (16..31).
struct Iq4xsActivation {
  __m256i lo[4], hi[4];
};
inline Iq4xsActivation iq4xs_activation(const int8_t* a) {
  Iq4xsActivation y;
  for (int p = 0; p < 4; ++p) {
    y.lo[p] = load2x128(a + 64 * p, a + 64 * p + 32);
    y.hi[p] = load2x128(a + 64 * p + 16, a + 64 * p + 48);
  }
  return y;
}

// One super-block's integer sum sum(scale_s * q * a) (8 int32 lanes, unsummed).
inline __m256i iq4xs_block_sum(const BlockIQ4_XS& x, const Iq4xsActivation& y, __m256i table) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i ls32 = iq4xs_scales(x);
  const __m256i sc = _mm256_broadcastsi128_si256(
      _mm_packs_epi32(_mm256_castsi256_si128(ls32), _mm256_extracti128_si256(ls32, 1)));
  __m256i sum0 = _mm256_setzero_si256(), sum1 = _mm256_setzero_si256();
  for (int p = 0; p < 4; ++p) {
    // Sub-blocks 2p and 2p + 1: 16 bytes each; low nibbles are elements 0..15, high 16..31.
    const __m256i q = load256(x.qs + 32 * p);
    const __m256i wl = _mm256_shuffle_epi8(table, _mm256_and_si256(q, m4));
    const __m256i wh = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
    const __m256i pl = mul_signed(wl, y.lo[p]);
    const __m256i ph = mul_signed(wh, y.hi[p]);
    const __m256i scale = _mm256_shuffle_epi8(sc, load256(kPairMasks.m[p]));
    sum0 = _mm256_add_epi32(sum0, _mm256_madd_epi16(pl, scale));
    sum1 = _mm256_add_epi32(sum1, _mm256_madd_epi16(ph, scale));
  }
  return _mm256_add_epi32(sum0, sum1);
}

float vec_dot_iq4xs(int64_t n, const void* w, const void* act) {
  const auto* x = static_cast<const BlockIQ4_XS*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(act);
  const __m256i table = value_table();
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float d = y[i].d * f16_to_f32(x[i].d);
    const __m256i sum = iq4xs_block_sum(x[i], iq4xs_activation(y[i].qs), table);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sum), acc);
  }
  return hsum(acc);
}

// Decode's GEMV: the activation's super-blocks are put in the codes' order once per call (eight
// 128-bit inserts each, which vec_dot repeats for every row); each row then runs vec_dot's
// operations in its order, so out[r] is vec_dot of row r bit for bit.
void gemv_iq4xs(int64_t n, const void* weights, int64_t row_stride, int64_t rows,
                const void* activations, float* out) {
  if (rows <= 0) return;
  const auto* y = static_cast<const BlockQ8_K*>(activations);
  const int64_t nb = n / kQKK;
  Iq4xsActivation* laid_out = gemv_scratch<Iq4xsActivation>(nb);
  for (int64_t i = 0; i < nb; ++i) laid_out[i] = iq4xs_activation(y[i].qs);
  const __m256i table = value_table();
  const auto* w = static_cast<const uint8_t*>(weights);
  for (int64_t r = 0; r < rows; ++r) {
    const auto* x = reinterpret_cast<const BlockIQ4_XS*>(w + r * row_stride);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
      const float d = y[i].d * f16_to_f32(x[i].d);
      const __m256i sum = iq4xs_block_sum(x[i], laid_out[i], table);
      acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sum), acc);
    }
    out[r] = hsum(acc);
  }
}

// ---------------------------------------------------------------------------------------------
// Multi-row dot products (vec_dot_multi): each weight block is looked up once, then dotted with the
// N activation rows; per row the same integer sums and float operations as vec_dot above
// (bit-identical results).

// Looked-up (signed) weight values w, kept as |w| and w: mul(a) gives the sums of pairs of w * a
// (int16) as |w| times a carrying the sign of w.
struct SignedWeights {
  __m256i abs, w;
  void set(__m256i v) {
    abs = _mm256_sign_epi8(v, v);
    w = v;
  }
  __m256i mul(__m256i a) const { return _mm256_maddubs_epi16(abs, _mm256_sign_epi8(a, w)); }
};

struct MultiIq4nl {
  template <int N>
  static void run(int64_t n, const void* w, const uint8_t* act, int64_t stride, float* out) {
    const auto* x = static_cast<const BlockIQ4_NL*>(w);
    const Columns<BlockQ8_0, N> y(act, stride);
    const __m256i table = value_table();
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc0[N], acc1[N];
    for (int j = 0; j < N; ++j) acc0[j] = acc1[j] = _mm256_setzero_ps();
    const int64_t nb = n / kQK;
    auto block = [&](int64_t i, __m256(&acc)[N]) __attribute__((always_inline)) {
      const __m128i q = load128(x[i].qs);
      const __m256i idx = _mm256_and_si256(
          _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1), m4);
      SignedWeights v;
      v.set(_mm256_shuffle_epi8(table, idx));
      const float xd = f16_to_f32(x[i].d);
      for (int j = 0; j < N; ++j) {
        const BlockQ8_0& b = y[j][i];
        const __m256i s = _mm256_madd_epi16(v.mul(load256(b.qs)), ones);
        acc[j] = _mm256_add_ps(
            acc[j], _mm256_mul_ps(_mm256_set1_ps(xd * f16_to_f32(b.d)), _mm256_cvtepi32_ps(s)));
      }
    };
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
      block(i, acc0);
      block(i + 1, acc1);
    }
    if (i < nb) block(i, acc0);
    for (int j = 0; j < N; ++j) out[j] = hsum(_mm256_add_ps(acc0[j], acc1[j]));
  }
};

struct MultiIq4xs {
  template <int N>
  static void run(int64_t n, const void* w, const uint8_t* act, int64_t stride, float* out) {
    const auto* x = static_cast<const BlockIQ4_XS*>(w);
    const Columns<BlockQ8_K, N> y(act, stride);
    const __m256i table = value_table();
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[N];
    for (int j = 0; j < N; ++j) acc[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / kQKK; ++i) {
      const float xd = f16_to_f32(x[i].d);
      const __m256i ls32 = iq4xs_scales(x[i]);
      const __m256i sc = _mm256_broadcastsi128_si256(
          _mm_packs_epi32(_mm256_castsi256_si128(ls32), _mm256_extracti128_si256(ls32, 1)));
      // Sub-blocks 2p and 2p + 1: 16 bytes each; low nibbles are elements 0..15, high 16..31.
      SignedWeights wl[4], wh[4];
      __m256i scale[4];
      for (int p = 0; p < 4; ++p) {
        const __m256i q = load256(x[i].qs + 32 * p);
        wl[p].set(_mm256_shuffle_epi8(table, _mm256_and_si256(q, m4)));
        wh[p].set(_mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4)));
        scale[p] = _mm256_shuffle_epi8(sc, load256(kPairMasks.m[p]));
      }
      for (int j = 0; j < N; ++j) {
        const BlockQ8_K& b = y[j][i];
        const float d = b.d * xd;
        const int8_t* a = b.qs;
        __m256i sum0 = _mm256_setzero_si256(), sum1 = _mm256_setzero_si256();
        for (int p = 0; p < 4; ++p) {
          const __m256i pl = wl[p].mul(load2x128(a + 64 * p, a + 64 * p + 32));
          const __m256i ph = wh[p].mul(load2x128(a + 64 * p + 16, a + 64 * p + 48));
          sum0 = _mm256_add_epi32(sum0, _mm256_madd_epi16(pl, scale[p]));
          sum1 = _mm256_add_epi32(sum1, _mm256_madd_epi16(ph, scale[p]));
        }
        acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d),
                                 _mm256_cvtepi32_ps(_mm256_add_epi32(sum0, sum1)), acc[j]);
      }
    }
    for (int j = 0; j < N; ++j) out[j] = hsum(acc[j]);
  }
};

// ---------------------------------------------------------------------------------------------
// Dequantization: same arithmetic as the reference, scale * value.

// 16 bytes of nibbles -> 32 values scaled by s: elements 0..15 low nibbles, 16..31 high.
inline void store_group32(__m128i q, __m256i table, float s, float* dst) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i idx = _mm256_and_si256(
      _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1), m4);
  const __m256i v = _mm256_shuffle_epi8(table, idx);
  const __m256 vs = _mm256_set1_ps(s);
  const __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
  const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
  for (int k = 0; k < 4; ++k) {
    _mm256_storeu_ps(dst + 8 * k,
                     _mm256_mul_ps(vs, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[k]))));
  }
}

void dequantize_iq4nl(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockIQ4_NL*>(src);
  const __m256i table = value_table();
  for (int64_t i = 0; i < n / kQK; ++i)
    store_group32(load128(x[i].qs), table, f16_to_f32(x[i].d), dst + kQK * i);
}

void dequantize_iq4xs(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockIQ4_XS*>(src);
  const __m256i table = value_table();
  for (int64_t i = 0; i < n / kQKK; ++i, dst += kQKK) {
    const float d = f16_to_f32(x[i].d);
    for (int j = 0; j < 8; ++j) {
      store_group32(load128(x[i].qs + 16 * j), table, d * static_cast<float>(iq4xs_scale(x[i], j)),
                    dst + 32 * j);
    }
  }
}

}  // namespace

void fill_iquants_avx2(KernelTable& table) {
  table[GgmlType::IQ4_NL] = {dequantize_iq4nl, nullptr, vec_dot_iq4nl,
                             vec_dot_multi_of<MultiIq4nl>};
  table[GgmlType::IQ4_XS] = {dequantize_iq4xs, nullptr, vec_dot_iq4xs, vec_dot_multi_of<MultiIq4xs>,
                             gemv_iq4xs};
}

}  // namespace strata::quant
