#pragma once

#include <cstdint>

namespace strata::ops {

// out = x / sqrt(mean(x^2) + eps) * weight   (weight may be null: no scaling). out may alias x.
void rms_norm(const float* x, const float* weight, float* out, int64_t n, float eps);

// rms_norm of `rows` consecutive rows of n values, each with the same bits as alone (several
// rows' sums run side by side). out may alias x.
void rms_norm_rows(const float* x, const float* weight, float* out, int64_t rows, int64_t n,
                   float eps);

}  // namespace strata::ops
