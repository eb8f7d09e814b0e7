// Importance-weighted quantizers of the legacy weight formats Q4_0, Q4_1, Q5_0 and Q5_1
// (quantize_row_weighted in quant.h; strata quantize --imatrix). Without weights they write the
// reference quantizer's bytes (legacy_scalar.cpp), so a file quantized without an importance
// matrix stays byte-identical to other GGUF tools' output. With weights, each block of 32 is
// searched for the scale (and min) that cuts the weighted squared error, judged with the scale
// rounded to f16 as stored; the reference block is a candidate too, so the search never does worse
// than it on the error the weights define.

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

constexpr int kHalf = kQK / 2;

float weighted_block_error(const float* x, const float* y, const float* w) {
  float err = 0;
  for (int i = 0; i < kQK; ++i) err += error_weight(w, i) * (y[i] - x[i]) * (y[i] - x[i]);
  return err;
}

// Codes 0..15 (or 0..31) into the block's nibbles (element j low, j + 16 high) and, for the 5-bit
// formats, bit 4 of element j into bit j of qh.
template <typename Block>
void pack_codes(const int* q, Block& b) {
  uint32_t high = 0;
  for (int j = 0; j < kHalf; ++j) {
    b.qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + kHalf] & 0x0f) << 4));
    high |= static_cast<uint32_t>(q[j] >> 4) << j;
    high |= static_cast<uint32_t>(q[j + kHalf] >> 4) << (j + kHalf);
  }
  if constexpr (requires { b.qh; }) std::memcpy(b.qh, &high, sizeof high);
}

// Every block as the reference quantizer writes it; with weights, replaced by the block `search`
// writes when that one decodes with the smaller weighted error.
template <typename Block, typename Search>
void quantize_blocks_weighted(const float* src, void* dst, int64_t n, const float* w, GgmlType type,
                              Search search) {
  const TypeKernels ref = kernels_exact(type, Isa::scalar);
  auto* blocks = static_cast<Block*>(dst);
  for (int64_t ib = 0; ib < n / kQK; ++ib, src += kQK) {
    Block& b = blocks[ib];
    ref.quantize_row(src, &b, kQK);
    if (!w) continue;
    const float* bw = error_weights_from(w, static_cast<int>(ib * kQK));
    Block found = b;
    search(src, bw, found);
    float ref_values[kQK], found_values[kQK];
    ref.dequantize_row(&b, ref_values, kQK);
    ref.dequantize_row(&found, found_values, kQK);
    if (weighted_block_error(src, found_values, bw) < weighted_block_error(src, ref_values, bw))
      b = found;
  }
}

// ---- affine: x ~= d * q + m, q in 0..nmax (Q4_1, Q5_1), d >= 0, m of either sign ----

void affine_codes(const float* x, float d, float m, int nmax, int* q) {
  for (int i = 0; i < kQK; ++i) {
    q[i] = d > 0 ? nearest_int(std::clamp((x[i] - m) / d, 0.0f, static_cast<float>(nmax))) : 0;
  }
}

float affine_error(const float* x, const int* q, float d, float m, const float* w) {
  float err = 0;
  for (int i = 0; i < kQK; ++i) {
    const float e = std::fma(static_cast<float>(q[i]), d, m) - x[i];  // as dequantized
    err += error_weight(w, i) * e * e;
  }
  return err;
}

// Weighted least-squares d and m for fixed codes; false when the codes cannot fix both (all equal)
// or the fit turns the scale negative.
bool affine_least_squares(const float* x, const int* q, const float* w, float* d, float* m) {
  double sw = 0, sq = 0, sqq = 0, sx = 0, sqx = 0;
  for (int i = 0; i < kQK; ++i) {
    const double wi = error_weight(w, i);
    sw += wi;
    sq += wi * q[i];
    sqq += wi * static_cast<double>(q[i]) * q[i];
    sx += wi * x[i];
    sqx += wi * static_cast<double>(q[i]) * x[i];
  }
  const double det = sw * sqq - sq * sq;
  if (!(det > 0)) return false;
  const double scale = (sw * sqx - sq * sx) / det;
  if (!(scale > 0)) return false;
  *d = static_cast<float>(scale);
  *m = static_cast<float>((sqq * sx - sq * sqx) / det);
  return true;
}

struct AffineFit {
  float d, m;  // as stored (f16-rounded)
  int q[kQK];
  float error;
};

// Candidate steps map the block's range onto nmax-1 .. nmax+2 levels (beyond nmax clips the
// ends); each is refined three times by least squares for its codes.
AffineFit fit_affine(const float* x, int nmax, const float* w) {
  const auto [lo_it, hi_it] = std::minmax_element(x, x + kQK);
  const float lo = *lo_it, hi = *hi_it;
  AffineFit best{};
  best.error = std::numeric_limits<float>::infinity();
  auto consider = [&](float d, float m) {
    AffineFit c;
    c.d = round_f16(d);
    c.m = round_f16(m);
    affine_codes(x, c.d, c.m, nmax, c.q);
    c.error = affine_error(x, c.q, c.d, c.m, w);
    if (c.error < best.error) best = c;
  };
  consider(0, lo);  // a constant block, or the fallback
  if (!(hi > lo)) return best;
  for (int k = -10; k <= 20; ++k) {
    float d = (hi - lo) / (static_cast<float>(nmax) + 0.1f * static_cast<float>(k)), m = lo;
    for (int iter = 0; iter < 3; ++iter) {
      int q[kQK];
      affine_codes(x, d, m, nmax, q);
      if (!affine_least_squares(x, q, w, &d, &m)) break;
      consider(d, m);
    }
  }
  return best;
}

// ---- symmetric: x ~= d * (q - half), q in 0..2*half-1 (Q4_0, Q5_0) ----

template <typename Block, int kHalfRange>
void search_symmetric(const float* x, const float* w, Block& b) {
  const float d = round_f16(fit_symmetric_scale(x, kQK, kHalfRange, kHalfRange - 1, w));
  int q[kQK];
  for (int i = 0; i < kQK; ++i)
    q[i] = quantize_symmetric(x[i], d, kHalfRange, kHalfRange - 1) + kHalfRange;
  b.d = f32_to_f16(d);
  pack_codes(q, b);
}

template <typename Block, int kMaxCode>
void search_affine(const float* x, const float* w, Block& b) {
  const AffineFit fit = fit_affine(x, kMaxCode, w);
  b.d = f32_to_f16(fit.d);
  b.m = f32_to_f16(fit.m);
  pack_codes(fit.q, b);
}

void quantize_q4_0_weighted(const float* src, void* dst, int64_t n, const float* w) {
  quantize_blocks_weighted<BlockQ4_0>(src, dst, n, w, GgmlType::Q4_0,
                                      search_symmetric<BlockQ4_0, 8>);
}
void quantize_q5_0_weighted(const float* src, void* dst, int64_t n, const float* w) {
  quantize_blocks_weighted<BlockQ5_0>(src, dst, n, w, GgmlType::Q5_0,
                                      search_symmetric<BlockQ5_0, 16>);
}
void quantize_q4_1_weighted(const float* src, void* dst, int64_t n, const float* w) {
  quantize_blocks_weighted<BlockQ4_1>(src, dst, n, w, GgmlType::Q4_1, search_affine<BlockQ4_1, 15>);
}
void quantize_q5_1_weighted(const float* src, void* dst, int64_t n, const float* w) {
  quantize_blocks_weighted<BlockQ5_1>(src, dst, n, w, GgmlType::Q5_1, search_affine<BlockQ5_1, 31>);
}

}  // namespace

WeightedQuantizeFn legacy_weighted_quantizer(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0:
      return quantize_q4_0_weighted;
    case GgmlType::Q4_1:
      return quantize_q4_1_weighted;
    case GgmlType::Q5_0:
      return quantize_q5_0_weighted;
    case GgmlType::Q5_1:
      return quantize_q5_1_weighted;
    default:
      return nullptr;
  }
}

}  // namespace strata::quant
