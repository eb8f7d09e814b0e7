#include "ops/rms_norm.h"

#include <cmath>

namespace strata::ops {

void rms_norm(const float* x, const float* weight, float* out, int64_t n, float eps) {
  double sum = 0;  // double: long rows of large activations lose precision in float
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(n) + eps));
  if (weight) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale;
  }
}

}  // namespace strata::ops
