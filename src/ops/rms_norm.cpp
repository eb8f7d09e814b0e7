#include "ops/rms_norm.h"

#include <cmath>

namespace strata::ops {

void rms_norm(const float* x, const float* weight, float* out, int64_t n, float eps) {
  // Squares in float, summed in double, the scale in float: the order other GGUF engines use, so
  // results agree to the last bit (activation quantization downstream amplifies any difference).
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (weight) {
    for (int64_t i = 0; i < n; ++i) out[i] = (x[i] * scale) * weight[i];
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale;
  }
}

}  // namespace strata::ops
