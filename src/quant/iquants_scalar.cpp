// Scalar reference kernels of the non-linear 4-bit formats IQ4_NL (blocks of 32, activations in
// Q8_0) and IQ4_XS (super-blocks of 256 with 6-bit sub-block scales, activations in Q8_K).
// value = scale * kIq4nlValues[q]. Ground truth for the faster levels: written for clarity.
//
// Within a group of 32 elements stored in 16 bytes (an IQ4_NL block, an IQ4_XS sub-block),
// element e (0..15) is the low nibble of byte e and element e + 16 the high nibble of byte e.

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

constexpr int kGroup = 32;  // elements per IQ4_NL block and per IQ4_XS sub-block

int nibble(const uint8_t* qs, int e) {
  return (qs[e % 16] >> (4 * (e / 16))) & 15;
}
void set_nibble(uint8_t* qs, int e, int q) {
  qs[e % 16] = static_cast<uint8_t>(qs[e % 16] | (q << (4 * (e / 16))));
}
float value(int q) {
  return static_cast<float>(kIq4nlValues[q]);
}

// ---------------------------------------------------------------------------------------------
// Dequantization and dot products.

void dequantize_iq4nl(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockIQ4_NL*>(src);
  for (int64_t ib = 0; ib < n / kQK; ++ib, dst += kQK) {
    const float d = f16_to_f32(blocks[ib].d);
    for (int e = 0; e < kGroup; ++e) dst[e] = d * value(nibble(blocks[ib].qs, e));
  }
}

void dequantize_iq4xs(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockIQ4_XS*>(src);
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    const BlockIQ4_XS& b = blocks[ib];
    const float d = f16_to_f32(b.d);
    for (int j = 0; j < kQKK / kGroup; ++j, dst += kGroup) {
      const float dl = d * static_cast<float>(iq4xs_scale(b, j));
      for (int e = 0; e < kGroup; ++e) dst[e] = dl * value(nibble(b.qs + 16 * j, e));
    }
  }
}

// sum over one group of 32 of kIq4nlValues[q] * a.
int32_t group_dot(const uint8_t* qs, const int8_t* a) {
  int32_t sum = 0;
  for (int e = 0; e < kGroup; ++e) sum += kIq4nlValues[nibble(qs, e)] * a[e];
  return sum;
}

float vec_dot_iq4nl(int64_t n, const void* w, const void* act) {
  const auto* wb = static_cast<const BlockIQ4_NL*>(w);
  const auto* ab = static_cast<const BlockQ8_0*>(act);
  float sum = 0;
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    sum += f16_to_f32(wb[ib].d) * f16_to_f32(ab[ib].d) *
           static_cast<float>(group_dot(wb[ib].qs, ab[ib].qs));
  }
  return sum;
}

float vec_dot_iq4xs(int64_t n, const void* w, const void* act) {
  const auto* wb = static_cast<const BlockIQ4_XS*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(act);
  float sum = 0;
  for (int64_t ib = 0; ib < n / kQKK; ++ib) {
    int32_t scaled = 0;
    for (int j = 0; j < kQKK / kGroup; ++j) {
      scaled += iq4xs_scale(wb[ib], j) * group_dot(wb[ib].qs + 16 * j, ab[ib].qs + kGroup * j);
    }
    sum += f16_to_f32(wb[ib].d) * ab[ib].d * static_cast<float>(scaled);
  }
  return sum;
}

// ---------------------------------------------------------------------------------------------
// Quantization: x ~= s * kIq4nlValues[q]. For a fixed s each element takes the nearest table
// entry; the error is then sum(x^2) - (sum x v)^2 / sum v^2 at the least-squares scale
// s = sum x v / sum v^2, so candidate scales are ranked by (sum x v)^2 / sum v^2.

// Index of the table entry nearest to t (the table is sorted ascending).
int nearest_index(float t) {
  int lo = 0;
  while (lo < 15 && static_cast<float>(kIq4nlValues[lo + 1]) <= t) ++lo;
  // kIq4nlValues[lo] <= t < kIq4nlValues[lo + 1], or t is outside the table.
  if (lo < 15 && t - value(lo) > value(lo + 1) - t) ++lo;
  return lo;
}

int quantize_nl(float x, float s) {
  return s != 0 ? nearest_index(x / s) : 8;
}

float nl_error(const float* x, const int* q, int n, float s, const float* w) {
  float err = 0;
  for (int i = 0; i < n; ++i) {
    const float e = s * value(q[i]) - x[i];
    err += error_weight(w, i) * e * e;
  }
  return err;
}

// Best scale for one group of 32 (either sign: the table is not symmetric).
float fit_nl(const float* x, int n, const float* w) {
  const float vmax = signed_absmax(x, n);
  if (vmax == 0) return 0;
  double best_score = -1;
  float best_s = 0;
  int q[kGroup];
  // The extreme value maps near the first (-127) or the last (+113) table entry.
  for (const float target : {value(0), value(15)}) {
    for (int k = -10; k <= 10; ++k) {
      float s = vmax / (target + (target < 0 ? -1.5f : 1.5f) * static_cast<float>(k));
      for (int iter = 0; iter < 3; ++iter) {
        double sxv = 0, svv = 0;
        for (int i = 0; i < n; ++i) {
          q[i] = quantize_nl(x[i], s);
          sxv += error_weight(w, i) * static_cast<double>(x[i]) * value(q[i]);
          svv += error_weight(w, i) * static_cast<double>(value(q[i])) * value(q[i]);
        }
        if (!(svv > 0)) break;  // (only with every weight zero: no table entry is zero)
        const double score = sxv * sxv / svv;
        if (score > best_score) {
          best_score = score;
          best_s = static_cast<float>(sxv / svv);
        }
        s = static_cast<float>(sxv / svv);
      }
    }
  }
  return best_s;
}

void quantize_iq4nl_weighted(const float* src, void* dst, int64_t n, const float* w) {
  auto* blocks = static_cast<BlockIQ4_NL*>(dst);
  for (int64_t ib = 0; ib < n / kQK; ++ib, src += kQK) {
    BlockIQ4_NL& b = blocks[ib];
    const float s = round_f16(fit_nl(src, kGroup, w ? w + ib * kQK : nullptr));
    b.d = f32_to_f16(s);
    std::memset(b.qs, 0, sizeof b.qs);
    for (int e = 0; e < kGroup; ++e) set_nibble(b.qs, e, quantize_nl(src[e], s));
  }
}

// Sub-block scales fitted one by one, quantized to 6-bit integers -32..31 against d (the largest
// maps to -32), each integer polished by trying its neighbours, then d refitted by least squares.
void quantize_iq4xs_weighted(const float* src, void* dst, int64_t n, const float* weights) {
  constexpr int kSubs = kQKK / kGroup;
  auto* blocks = static_cast<BlockIQ4_XS*>(dst);
  for (int64_t ib = 0; ib < n / kQKK; ++ib, src += kQKK) {
    const float* w = weights ? weights + ib * kQKK : nullptr;
    float s[kSubs];
    float smax_abs = 0, smax = 0;
    for (int j = 0; j < kSubs; ++j) {
      s[j] = fit_nl(src + kGroup * j, kGroup, error_weights_from(w, kGroup * j));
      if (std::fabs(s[j]) > smax_abs) {
        smax_abs = std::fabs(s[j]);
        smax = s[j];
      }
    }
    float d = round_f16(-smax / 32.0f);
    int ls[kSubs];
    int q[kQKK];
    float total = 0;
    for (int j = 0; j < kSubs; ++j) {
      const float* xs = src + kGroup * j;
      const int guess = d != 0 ? std::clamp(nearest_int(s[j] / d), -32, 31) : 0;
      float best = std::numeric_limits<float>::infinity();
      ls[j] = guess;
      int tmp[kGroup];
      for (int l = std::max(guess - 1, -32); l <= std::min(guess + 1, 31); ++l) {
        const float dl = d * static_cast<float>(l);
        for (int e = 0; e < kGroup; ++e) tmp[e] = quantize_nl(xs[e], dl);
        const float err = nl_error(xs, tmp, kGroup, dl, error_weights_from(w, kGroup * j));
        if (err < best) {
          best = err;
          ls[j] = l;
        }
      }
      const float dl = d * static_cast<float>(ls[j]);
      for (int e = 0; e < kGroup; ++e) q[kGroup * j + e] = quantize_nl(xs[e], dl);
      total += best;
    }
    for (int iter = 0; iter < 2; ++iter) {
      double aa = 0, ax = 0;
      for (int i = 0; i < kQKK; ++i) {
        const double a = static_cast<double>(ls[i / kGroup]) * value(q[i]);
        aa += error_weight(w, i) * a * a;
        ax += error_weight(w, i) * a * src[i];
      }
      if (!(aa > 0)) break;
      const float nd = round_f16(static_cast<float>(ax / aa));
      int nq[kQKK];
      float err = 0;
      for (int j = 0; j < kSubs; ++j) {
        const float dl = nd * static_cast<float>(ls[j]);
        for (int e = 0; e < kGroup; ++e) nq[kGroup * j + e] = quantize_nl(src[kGroup * j + e], dl);
        err += nl_error(src + kGroup * j, nq + kGroup * j, kGroup, dl,
                        error_weights_from(w, kGroup * j));
      }
      if (!(err < total)) break;
      total = err;
      d = nd;
      std::copy(nq, nq + kQKK, q);
    }
    BlockIQ4_XS& b = blocks[ib];
    std::memset(&b, 0, sizeof b);
    b.d = f32_to_f16(d);
    for (int j = 0; j < kSubs; ++j) {
      const int v = ls[j] + 32;  // 0..63
      b.scales_l[j / 2] = static_cast<uint8_t>(b.scales_l[j / 2] | ((v & 15) << (4 * (j % 2))));
      b.scales_h = static_cast<uint16_t>(b.scales_h | ((v >> 4) << (2 * j)));
      for (int e = 0; e < kGroup; ++e) set_nibble(b.qs + 16 * j, e, q[kGroup * j + e]);
    }
  }
}

void quantize_iq4nl(const float* src, void* dst, int64_t n) {
  quantize_iq4nl_weighted(src, dst, n, nullptr);
}

void quantize_iq4xs(const float* src, void* dst, int64_t n) {
  quantize_iq4xs_weighted(src, dst, n, nullptr);
}

}  // namespace

WeightedQuantizeFn iquant_weighted_quantizer(GgmlType type) {
  switch (type) {
    case GgmlType::IQ4_NL:
      return quantize_iq4nl_weighted;
    case GgmlType::IQ4_XS:
      return quantize_iq4xs_weighted;
    default:
      return nullptr;
  }
}

void fill_iquants_scalar(KernelTable& table) {
  table[GgmlType::IQ4_NL] = {dequantize_iq4nl, quantize_iq4nl, vec_dot_iq4nl};
  table[GgmlType::IQ4_XS] = {dequantize_iq4xs, quantize_iq4xs, vec_dot_iq4xs};
}

}  // namespace strata::quant
