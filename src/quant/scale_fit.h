#pragma once
// Internal: the least-squares scale search the weight quantizers share (K-quants, legacy types).
// Each value's squared error counts by its weight w[i] (error_weights.h; null weights: 1 each).

namespace strata::quant {

// x rounded through f16, as a block's stored scale is.
float round_f16(float x);

// The value of largest magnitude, with its sign (the first one on ties; 0 when all are 0).
float signed_absmax(const float* x, int n);

// x ~= s * L with integer L in -nneg..npos (s of either sign): L for one value.
int quantize_symmetric(float x, float s, int nneg, int npos);
// Weighted squared error of s * L against x.
float symmetric_error(const float* x, const int* L, int n, float s, const float* w);
// Best s for n <= 32 values (0 when all are 0). The error for fixed L is
// sum(x^2) - (sum xL)^2 / sum L^2 at the least-squares scale s = sum xL / sum L^2, so candidates
// (the extreme value mapped near -nneg or +npos, each refined three times) are ranked by
// (sum xL)^2 / sum L^2.
float fit_symmetric_scale(const float* x, int n, int nneg, int npos, const float* w);

}  // namespace strata::quant
