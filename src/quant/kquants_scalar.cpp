// Scalar reference kernels of the K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) and their activation
// format Q8_K. This is the ground truth the faster levels are tested against: written for clarity,
// element by element, with the layout of each super-block spelled out in one place per type.
//
// Super-blocks hold 256 elements. Sub-blocks of 16 (Q2_K, Q3_K, Q6_K) or 32 (Q4_K, Q5_K) elements
// are contiguous in element order: sub-block s holds elements 16s.. or 32s.. . Only the storage of
// the quant bits interleaves, as described by the *_pos helpers below.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "quant/error_weights.h"
#include "quant/kernel_table.h"
#include "quant/kquants_common.h"
#include "quant/scale_fit.h"

namespace strata::quant {
namespace {

// ---------------------------------------------------------------------------------------------
// Where the bits of element i (0..255) of a super-block are stored.

// Q2_K and the low 2 bits of Q3_K: the super-block is two halves of 128; in half h, element
// 32*j + l (j = 0..3, l = 0..31) is bits 2j..2j+1 of qs[32*h + l].
struct BitPos {
  int byte;
  int shift;
};
BitPos two_bit_pos(int i) {
  return {32 * (i / 128) + i % 32, 2 * ((i % 128) / 32)};
}
// High bit of Q3_K (hmask) and Q5_K (qh): bit i / 32 of byte i % 32.
BitPos high_bit_pos(int i) {
  return {i % 32, i / 32};
}
// Q4_K / Q5_K nibbles: sub-blocks 2p and 2p+1 share qs[32p .. 32p+31], low nibbles first.
BitPos k4_nibble_pos(int i) {
  return {32 * (i / 64) + i % 32, 4 * ((i / 32) % 2)};
}
// Q6_K: halves of 128; in half h, element 32*j + l has its low 4 bits in ql[64h + 32*(j % 2) + l]
// (low nibble for j < 2, high nibble for j >= 2) and its high 2 bits at bits 2j..2j+1 of
// qh[32h + l].
BitPos q6_low_pos(int i) {
  const int h = i / 128, j = (i % 128) / 32, l = i % 32;
  return {64 * h + 32 * (j % 2) + l, 4 * (j / 2)};
}
BitPos q6_high_pos(int i) {
  const int h = i / 128, j = (i % 128) / 32, l = i % 32;
  return {32 * h + l, 2 * j};
}

int get_bits(const uint8_t* p, BitPos pos, int mask) {
  return (p[pos.byte] >> pos.shift) & mask;
}
void or_bits(uint8_t* p, BitPos pos, int value) {
  p[pos.byte] = static_cast<uint8_t>(p[pos.byte] | (value << pos.shift));
}

// Quant values of one super-block, unsigned as stored (before any offset).
void q2k_quants(const BlockQ2_K& b, int* q) {
  for (int i = 0; i < kQKK; ++i) q[i] = get_bits(b.qs, two_bit_pos(i), 3);
}
// Signed: -4..3.
void q3k_quants(const BlockQ3_K& b, int* q) {
  for (int i = 0; i < kQKK; ++i) {
    q[i] = get_bits(b.qs, two_bit_pos(i), 3) + 4 * get_bits(b.hmask, high_bit_pos(i), 1) - 4;
  }
}
void q4k_quants(const BlockQ4_K& b, int* q) {
  for (int i = 0; i < kQKK; ++i) q[i] = get_bits(b.qs, k4_nibble_pos(i), 15);
}
void q5k_quants(const BlockQ5_K& b, int* q) {
  for (int i = 0; i < kQKK; ++i) {
    q[i] = get_bits(b.qs, k4_nibble_pos(i), 15) + 16 * get_bits(b.qh, high_bit_pos(i), 1);
  }
}
// Signed: -32..31.
void q6k_quants(const BlockQ6_K& b, int* q) {
  for (int i = 0; i < kQKK; ++i) {
    q[i] = get_bits(b.ql, q6_low_pos(i), 15) + 16 * get_bits(b.qh, q6_high_pos(i), 3) - 32;
  }
}

// ---------------------------------------------------------------------------------------------
// Dequantization.

void dequantize_q2k(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ2_K*>(src);
  int q[kQKK];
  for (int64_t ib = 0; ib < n / kQKK; ++ib, dst += kQKK) {
    const BlockQ2_K& b = blocks[ib];
    const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
    q2k_quants(b, q);
    for (int i = 0; i < kQKK; ++i) {
      const int sm = b.scales[i / 16];
      dst[i] = d * static_cast<float>(sm & 15) * static_cast<float>(q[i]) -
               dmin * static_cast<float>(sm >> 4);
    }
  }
}

void dequantize_q3k(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ3_K*>(src);
  int q[kQKK];
  int8_t scales[16];
  for (int64_t ib = 0; ib < n / kQKK; ++ib, dst += kQKK) {
    const BlockQ3_K& b = blocks[ib];
    const float d = f16_to_f32(b.d);
    unpack_q3k_scales(b.scales, scales);
    q3k_quants(b, q);
    for (int i = 0; i < kQKK; ++i) {
      dst[i] = d * static_cast<float>(scales[i / 16]) * static_cast<float>(q[i]);
    }
  }
}

template <typename Block, void (*Quants)(const Block&, int*)>
void dequantize_k4_like(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const Block*>(src);
  int q[kQKK];
  uint8_t scales[8], mins[8];
  for (int64_t ib = 0; ib < n / kQKK; ++ib, dst += kQKK) {
    const Block& b = blocks[ib];
    const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
    unpack_k4_scales(b.scales, scales, mins);
    Quants(b, q);
    for (int i = 0; i < kQKK; ++i) {
      dst[i] = d * static_cast<float>(scales[i / 32]) * static_cast<float>(q[i]) -
               dmin * static_cast<float>(mins[i / 32]);
    }
  }
}

void dequantize_q6k(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ6_K*>(src);
  int q[kQKK];
  for (int64_t ib = 0; ib < n / kQKK; ++ib, dst += kQKK) {
    const BlockQ6_K& b = blocks[ib];
    const float d = f16_to_f32(b.d);
    q6k_quants(b, q);
    for (int i = 0; i < kQKK; ++i) {
      dst[i] = d * static_cast<float>(b.scales[i / 16]) * static_cast<float>(q[i]);
    }
  }
}

void dequantize_q8k(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ8_K*>(src);
  for (int64_t ib = 0; ib < n / kQKK; ++ib, dst += kQKK) {
    for (int i = 0; i < kQKK; ++i) dst[i] = blocks[ib].d * static_cast<float>(blocks[ib].qs[i]);
  }
}

// ---------------------------------------------------------------------------------------------
// Dot products with a Q8_K activation row: integer sums per sub-block, scaled once per sub-block.

// sum over sub-block s (of `len` elements) of q * a, and of a alone.
struct SubSums {
  int32_t qa;
  int32_t a;
};
SubSums sub_sums(const int* q, const int8_t* a, int start, int len) {
  SubSums s{0, 0};
  for (int i = start; i < start + len; ++i) {
    s.qa += q[i] * a[i];
    s.a += a[i];
  }
  return s;
}

float vec_dot_q2k(int64_t n, const void* w, const void* act) {
  const auto* wb = static_cast<const BlockQ2_K*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(act);
  int q[kQKK];
  float sum = 0;
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    q2k_quants(wb[ib], q);
    int32_t scaled = 0, mins = 0;
    for (int s = 0; s < 16; ++s) {
      const SubSums ss = sub_sums(q, ab[ib].qs, 16 * s, 16);
      scaled += (wb[ib].scales[s] & 15) * ss.qa;
      mins += (wb[ib].scales[s] >> 4) * ss.a;
    }
    sum += ab[ib].d * (f16_to_f32(wb[ib].d) * static_cast<float>(scaled) -
                       f16_to_f32(wb[ib].dmin) * static_cast<float>(mins));
  }
  return sum;
}

float vec_dot_q3k(int64_t n, const void* w, const void* act) {
  const auto* wb = static_cast<const BlockQ3_K*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(act);
  int q[kQKK];
  int8_t scales[16];
  float sum = 0;
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    q3k_quants(wb[ib], q);
    unpack_q3k_scales(wb[ib].scales, scales);
    int32_t scaled = 0;
    for (int s = 0; s < 16; ++s) scaled += scales[s] * sub_sums(q, ab[ib].qs, 16 * s, 16).qa;
    sum += ab[ib].d * f16_to_f32(wb[ib].d) * static_cast<float>(scaled);
  }
  return sum;
}

template <typename Block, void (*Quants)(const Block&, int*)>
float vec_dot_k4_like(int64_t n, const void* w, const void* act) {
  const auto* wb = static_cast<const Block*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(act);
  int q[kQKK];
  uint8_t scales[8], mins[8];
  float sum = 0;
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    Quants(wb[ib], q);
    unpack_k4_scales(wb[ib].scales, scales, mins);
    int32_t scaled = 0, min_sum = 0;
    for (int s = 0; s < 8; ++s) {
      const SubSums ss = sub_sums(q, ab[ib].qs, 32 * s, 32);
      scaled += scales[s] * ss.qa;
      min_sum += mins[s] * ss.a;
    }
    sum += ab[ib].d * (f16_to_f32(wb[ib].d) * static_cast<float>(scaled) -
                       f16_to_f32(wb[ib].dmin) * static_cast<float>(min_sum));
  }
  return sum;
}

float vec_dot_q6k(int64_t n, const void* w, const void* act) {
  const auto* wb = static_cast<const BlockQ6_K*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(act);
  int q[kQKK];
  float sum = 0;
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    q6k_quants(wb[ib], q);
    int32_t scaled = 0;
    for (int s = 0; s < 16; ++s) scaled += wb[ib].scales[s] * sub_sums(q, ab[ib].qs, 16 * s, 16).qa;
    sum += ab[ib].d * f16_to_f32(wb[ib].d) * static_cast<float>(scaled);
  }
  return sum;
}

// ---------------------------------------------------------------------------------------------
// Quantization of weights: per sub-block a scale (and for Q2_K/Q4_K/Q5_K a min) found by a search
// over candidate scales with least-squares refinement; then the sub-block scales themselves are
// quantized against the super-block scale, the integer scales polished by trying neighbours, and
// the super-block scale refitted by least squares. Every choice is judged by the squared error of
// the decoded values, computed with the f16-rounded super-block scales.

// ---- asymmetric: x ~= s * L - m, L in 0..nmax, s >= 0, m >= 0 ----

int quantize_asym(float x, float s, float m, int nmax) {
  if (!(s > 0)) return 0;
  return nearest_int(std::clamp((x + m) / s, 0.0f, static_cast<float>(nmax)));
}

float asymmetric_error(const float* x, const int* L, int n, float s, float m, const float* w) {
  float err = 0;
  for (int i = 0; i < n; ++i) {
    const float e = s * static_cast<float>(L[i]) - m - x[i];
    err += error_weight(w, i) * e * e;
  }
  return err;
}

// Least-squares s and m for fixed L, with the constraints s >= 0 and m >= 0.
void asym_least_squares(const float* x, const int* L, int n, float* s, float* m, const float* w) {
  double sw = 0, sl = 0, sll = 0, sx = 0, slx = 0;
  for (int i = 0; i < n; ++i) {
    const double wi = error_weight(w, i);
    sw += wi;
    sl += wi * L[i];
    sll += wi * static_cast<double>(L[i]) * L[i];
    sx += wi * x[i];
    slx += wi * static_cast<double>(L[i]) * x[i];
  }
  if (!(sw > 0)) {  // every weight zero: nothing to fit
    *s = 0;
    *m = 0;
    return;
  }
  const double det = sw * sll - sl * sl;
  double scale = 0, offset = std::min(sx / sw, 0.0);  // x ~= scale * L + offset
  if (!(det > 0) && sll > 0 && sx > 0) {              // all L equal and non-zero: the scale alone
    scale = slx / sll;
    offset = 0;
  } else if (det > 0) {
    scale = (sw * slx - sl * sx) / det;
    offset = (sll * sx - sl * slx) / det;
    if (offset > 0) {  // the offset can only pull down: fit the scale alone
      offset = 0;
      scale = slx / sll;
    }
    if (scale < 0) {
      scale = 0;
      offset = std::min(sx / sw, 0.0);
    }
  }
  *s = static_cast<float>(scale);
  *m = static_cast<float>(-offset);
}

// Best (s, m) for one sub-block; returns its squared error.
float fit_asym(const float* x, int n, int nmax, float* s_out, float* m_out, const float* w) {
  float lo = *std::min_element(x, x + n), hi = *std::max_element(x, x + n);
  lo = std::min(lo, 0.0f);
  int L[32];
  if (hi <= lo) {  // constant non-positive sub-block
    *s_out = 0;
    *m_out = -lo;
    std::fill(L, L + n, 0);
    return asymmetric_error(x, L, n, 0, -lo, w);
  }
  float best = std::numeric_limits<float>::infinity();
  // Candidate steps map the range onto nmax-1 .. nmax+2 levels (beyond nmax clips the ends).
  for (int k = -10; k <= 20; ++k) {
    float s = (hi - lo) / (static_cast<float>(nmax) + 0.1f * static_cast<float>(k));
    float m = -lo;
    for (int iter = 0; iter < 3; ++iter) {
      for (int i = 0; i < n; ++i) L[i] = quantize_asym(x[i], s, m, nmax);
      asym_least_squares(x, L, n, &s, &m, w);
      if (w) {
        // A fit to a few heavy values can run far beyond the sub-block's range; the super-block
        // scale is the largest sub-block's, so that would coarsen every other sub-block.
        const float step = (hi - lo) / static_cast<float>(nmax);
        s = std::min(s, 2 * step);
        m = std::min(m, -lo + 2 * step);
      }
    }
    const float err = asymmetric_error(x, L, n, s, m, w);
    if (err < best) {
      best = err;
      *s_out = s;
      *m_out = m;
    }
  }
  return best;
}

// Sub-block error when its scale and min are the integers sc and mn against d and dmin.
float asym_requant_error(const float* x, int n, int nmax, float s, float m, int* L,
                         const float* w) {
  for (int i = 0; i < n; ++i) L[i] = quantize_asym(x[i], s, m, nmax);
  return asymmetric_error(x, L, n, s, m, w);
}

// Shared super-block search of Q2_K, Q4_K, Q5_K: `subs` sub-blocks of `len`, quants 0..nmax,
// integer scales and mins 0..smax. Outputs d, dmin (f16), integer scales/mins and the quants.
struct AsymResult {
  f16_bits d, dmin;
  int sc[16], mn[16];
  int L[kQKK];
};

void asym_superblock(const float* x, int subs, int len, int nmax, int smax, AsymResult* r,
                     const float* w) {
  float s[16], m[16];
  float max_s = 0, max_m = 0;
  for (int j = 0; j < subs; ++j) {
    fit_asym(x + j * len, len, nmax, &s[j], &m[j], error_weights_from(w, j * len));
    max_s = std::max(max_s, s[j]);
    max_m = std::max(max_m, m[j]);
  }
  float d = round_f16(max_s / static_cast<float>(smax));
  float dmin = round_f16(max_m / static_cast<float>(smax));
  auto to_int = [smax](float v, float unit) {
    return unit > 0 ? std::clamp(nearest_int(v / unit), 0, smax) : 0;
  };
  for (int j = 0; j < subs; ++j) {
    r->sc[j] = to_int(s[j], d);
    r->mn[j] = to_int(m[j], dmin);
  }
  // Polish each sub-block's integer scale and min by trying neighbours.
  float total = 0;
  for (int j = 0; j < subs; ++j) {
    const float* xs = x + j * len;
    int tmp[32];
    float best = std::numeric_limits<float>::infinity();
    int best_sc = r->sc[j], best_mn = r->mn[j];
    for (int dsc = -1; dsc <= 1; ++dsc) {
      for (int dmn = -1; dmn <= 1; ++dmn) {
        const int sc = r->sc[j] + dsc, mn = r->mn[j] + dmn;
        if (sc < 0 || sc > smax || mn < 0 || mn > smax) continue;
        const float err =
            asym_requant_error(xs, len, nmax, d * static_cast<float>(sc),
                               dmin * static_cast<float>(mn), tmp, error_weights_from(w, j * len));
        if (err < best) {
          best = err;
          best_sc = sc;
          best_mn = mn;
        }
      }
    }
    r->sc[j] = best_sc;
    r->mn[j] = best_mn;
    total += asym_requant_error(xs, len, nmax, d * static_cast<float>(best_sc),
                                dmin * static_cast<float>(best_mn), r->L + j * len,
                                error_weights_from(w, j * len));
  }
  // Refit d and dmin by least squares for the chosen integers: x ~= d * (sc * L) - dmin * mn.
  for (int iter = 0; iter < 2; ++iter) {
    double aa = 0, ab = 0, bb = 0, ax = 0, bx = 0;
    for (int j = 0; j < subs; ++j) {
      for (int i = j * len; i < (j + 1) * len; ++i) {
        const double a = static_cast<double>(r->sc[j]) * r->L[i], b = -r->mn[j],
                     wi = error_weight(w, i);
        aa += wi * a * a;
        ab += wi * a * b;
        bb += wi * b * b;
        ax += wi * a * x[i];
        bx += wi * b * x[i];
      }
    }
    const double det = aa * bb - ab * ab;
    if (!(det > 0)) break;
    const float nd = round_f16(static_cast<float>((bb * ax - ab * bx) / det));
    const float ndmin = round_f16(static_cast<float>((aa * bx - ab * ax) / det));
    if (!(nd >= 0) || !(ndmin >= 0)) break;
    int L[kQKK];
    float err = 0;
    for (int j = 0; j < subs; ++j) {
      err += asym_requant_error(x + j * len, len, nmax, nd * static_cast<float>(r->sc[j]),
                                ndmin * static_cast<float>(r->mn[j]), L + j * len,
                                error_weights_from(w, j * len));
    }
    if (!(err < total)) break;
    total = err;
    d = nd;
    dmin = ndmin;
    std::copy(L, L + kQKK, r->L);
  }
  r->d = f32_to_f16(d);
  r->dmin = f32_to_f16(dmin);
}

void quantize_q2k_weighted(const float* src, void* dst, int64_t n, const float* w) {
  auto* blocks = static_cast<BlockQ2_K*>(dst);
  AsymResult r;
  for (int64_t ib = 0; ib < n / kQKK; ++ib, src += kQKK) {
    BlockQ2_K& b = blocks[ib];
    asym_superblock(src, 16, 16, 3, 15, &r, w ? w + ib * kQKK : nullptr);
    std::memset(&b, 0, sizeof b);
    b.d = r.d;
    b.dmin = r.dmin;
    for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>(r.sc[j] | (r.mn[j] << 4));
    for (int i = 0; i < kQKK; ++i) or_bits(b.qs, two_bit_pos(i), r.L[i]);
  }
}

template <typename Block, bool kFiveBit>
void quantize_k4_like_weighted(const float* src, void* dst, int64_t n, const float* w) {
  auto* blocks = static_cast<Block*>(dst);
  AsymResult r;
  for (int64_t ib = 0; ib < n / kQKK; ++ib, src += kQKK) {
    Block& b = blocks[ib];
    asym_superblock(src, 8, 32, kFiveBit ? 31 : 15, 63, &r, w ? w + ib * kQKK : nullptr);
    std::memset(&b, 0, sizeof b);
    b.d = r.d;
    b.dmin = r.dmin;
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 8; ++j) {
      sc[j] = static_cast<uint8_t>(r.sc[j]);
      mn[j] = static_cast<uint8_t>(r.mn[j]);
    }
    pack_k4_scales(sc, mn, b.scales);
    for (int i = 0; i < kQKK; ++i) {
      or_bits(b.qs, k4_nibble_pos(i), r.L[i] & 15);
      if constexpr (kFiveBit) or_bits(b.qh, high_bit_pos(i), r.L[i] >> 4);
    }
  }
}

// ---- symmetric: x ~= s * L (scale_fit.h) ----

// Shared super-block search of Q3_K and Q6_K: 16 sub-blocks of 16, quants -nneg..npos, signed
// integer scales -sneg..spos against d.
struct SymResult {
  f16_bits d;
  int sc[16];
  int L[kQKK];
};

void sym_superblock(const float* x, int nneg, int npos, int sneg, int spos, SymResult* r,
                    const float* w) {
  constexpr int kSubs = 16, kLen = 16;
  float s[kSubs];
  float smax_abs = 0, smax = 0;
  for (int j = 0; j < kSubs; ++j) {
    s[j] = fit_symmetric_scale(x + j * kLen, kLen, nneg, npos, error_weights_from(w, j * kLen));
    if (std::fabs(s[j]) > smax_abs) {
      smax_abs = std::fabs(s[j]);
      smax = s[j];
    }
  }
  // The largest scale maps to -sneg, the most negative integer scale.
  float d = round_f16(-smax / static_cast<float>(sneg));
  float total = 0;
  for (int j = 0; j < kSubs; ++j) {
    const float* xs = x + j * kLen;
    const int guess = d != 0 ? std::clamp(nearest_int(s[j] / d), -sneg, spos) : 0;
    int tmp[kLen];
    float best = std::numeric_limits<float>::infinity();
    int best_sc = guess;
    for (int sc = std::max(guess - 1, -sneg); sc <= std::min(guess + 1, spos); ++sc) {
      const float ds = d * static_cast<float>(sc);
      for (int i = 0; i < kLen; ++i) tmp[i] = quantize_symmetric(xs[i], ds, nneg, npos);
      const float err = symmetric_error(xs, tmp, kLen, ds, error_weights_from(w, j * kLen));
      if (err < best) {
        best = err;
        best_sc = sc;
      }
    }
    r->sc[j] = best_sc;
    const float ds = d * static_cast<float>(best_sc);
    for (int i = 0; i < kLen; ++i) r->L[j * kLen + i] = quantize_symmetric(xs[i], ds, nneg, npos);
    total += best;
  }
  // Refit d by least squares for the chosen integers: x ~= d * (sc * L).
  for (int iter = 0; iter < 2; ++iter) {
    double aa = 0, ax = 0;
    for (int i = 0; i < kQKK; ++i) {
      const double a = static_cast<double>(r->sc[i / kLen]) * r->L[i];
      aa += error_weight(w, i) * a * a;
      ax += error_weight(w, i) * a * x[i];
    }
    if (!(aa > 0)) break;
    const float nd = round_f16(static_cast<float>(ax / aa));
    int L[kQKK];
    float err = 0;
    for (int j = 0; j < kSubs; ++j) {
      const float ds = nd * static_cast<float>(r->sc[j]);
      for (int i = j * kLen; i < (j + 1) * kLen; ++i)
        L[i] = quantize_symmetric(x[i], ds, nneg, npos);
      err += symmetric_error(x + j * kLen, L + j * kLen, kLen, ds, error_weights_from(w, j * kLen));
    }
    if (!(err < total)) break;
    total = err;
    d = nd;
    std::copy(L, L + kQKK, r->L);
  }
  r->d = f32_to_f16(d);
}

void quantize_q3k_weighted(const float* src, void* dst, int64_t n, const float* w) {
  auto* blocks = static_cast<BlockQ3_K*>(dst);
  SymResult r;
  for (int64_t ib = 0; ib < n / kQKK; ++ib, src += kQKK) {
    BlockQ3_K& b = blocks[ib];
    sym_superblock(src, 4, 3, 32, 31, &r, w ? w + ib * kQKK : nullptr);
    std::memset(&b, 0, sizeof b);
    b.d = r.d;
    int8_t sc[16];
    for (int j = 0; j < 16; ++j) sc[j] = static_cast<int8_t>(r.sc[j]);
    pack_q3k_scales(sc, b.scales);
    for (int i = 0; i < kQKK; ++i) {
      const int v = r.L[i] + 4;  // 0..7
      or_bits(b.qs, two_bit_pos(i), v & 3);
      or_bits(b.hmask, high_bit_pos(i), v >> 2);
    }
  }
}

void quantize_q6k_weighted(const float* src, void* dst, int64_t n, const float* w) {
  auto* blocks = static_cast<BlockQ6_K*>(dst);
  SymResult r;
  for (int64_t ib = 0; ib < n / kQKK; ++ib, src += kQKK) {
    BlockQ6_K& b = blocks[ib];
    sym_superblock(src, 32, 31, 128, 127, &r, w ? w + ib * kQKK : nullptr);
    std::memset(&b, 0, sizeof b);
    b.d = r.d;
    for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(r.sc[j]);
    for (int i = 0; i < kQKK; ++i) {
      const int v = r.L[i] + 32;  // 0..63
      or_bits(b.ql, q6_low_pos(i), v & 15);
      or_bits(b.qh, q6_high_pos(i), v >> 4);
    }
  }
}

// The unweighted quantizers of the kernel table.
void quantize_q2k(const float* src, void* dst, int64_t n) {
  quantize_q2k_weighted(src, dst, n, nullptr);
}
template <typename Block, bool kFiveBit>
void quantize_k4_like(const float* src, void* dst, int64_t n) {
  quantize_k4_like_weighted<Block, kFiveBit>(src, dst, n, nullptr);
}
void quantize_q3k(const float* src, void* dst, int64_t n) {
  quantize_q3k_weighted(src, dst, n, nullptr);
}
void quantize_q6k(const float* src, void* dst, int64_t n) {
  quantize_q6k_weighted(src, dst, n, nullptr);
}

// ---- Q8_K activations: the element of largest magnitude maps to -127 ----

void quantize_q8k(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_K*>(dst);
  for (int64_t ib = 0; ib < n / kQKK; ++ib, src += kQKK) {
    BlockQ8_K& b = blocks[ib];
    float amax = 0, vmax = 0;
    for (int i = 0; i < kQKK; ++i) {
      if (std::fabs(src[i]) > amax) {
        amax = std::fabs(src[i]);
        vmax = src[i];
      }
    }
    if (amax == 0) {
      b.d = 0;
      std::memset(b.qs, 0, sizeof b.qs);
      std::memset(b.bsums, 0, sizeof b.bsums);
      continue;
    }
    const float iscale = -127.0f / vmax;
    for (int i = 0; i < kQKK; ++i) {
      b.qs[i] = static_cast<int8_t>(std::min(127, nearest_int(iscale * src[i])));
    }
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int i = 16 * j; i < 16 * j + 16; ++i) sum += b.qs[i];
      b.bsums[j] = static_cast<int16_t>(sum);
    }
    b.d = 1.0f / iscale;
  }
}

}  // namespace

WeightedQuantizeFn kquant_weighted_quantizer(GgmlType type) {
  switch (type) {
    case GgmlType::Q2_K:
      return quantize_q2k_weighted;
    case GgmlType::Q3_K:
      return quantize_q3k_weighted;
    case GgmlType::Q4_K:
      return quantize_k4_like_weighted<BlockQ4_K, false>;
    case GgmlType::Q5_K:
      return quantize_k4_like_weighted<BlockQ5_K, true>;
    case GgmlType::Q6_K:
      return quantize_q6k_weighted;
    default:
      return nullptr;
  }
}

void fill_kquants_scalar(KernelTable& table) {
  table[GgmlType::Q2_K] = {dequantize_q2k, quantize_q2k, vec_dot_q2k};
  table[GgmlType::Q3_K] = {dequantize_q3k, quantize_q3k, vec_dot_q3k};
  table[GgmlType::Q4_K] = {dequantize_k4_like<BlockQ4_K, q4k_quants>,
                           quantize_k4_like<BlockQ4_K, false>,
                           vec_dot_k4_like<BlockQ4_K, q4k_quants>};
  table[GgmlType::Q5_K] = {dequantize_k4_like<BlockQ5_K, q5k_quants>,
                           quantize_k4_like<BlockQ5_K, true>,
                           vec_dot_k4_like<BlockQ5_K, q5k_quants>};
  table[GgmlType::Q6_K] = {dequantize_q6k, quantize_q6k, vec_dot_q6k};
  table[GgmlType::Q8_K] = {dequantize_q8k, quantize_q8k, nullptr};
}

}  // namespace strata::quant
