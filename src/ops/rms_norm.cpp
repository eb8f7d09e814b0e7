#include "ops/rms_norm.h"

#include <cmath>

namespace strata::ops {
namespace {

// R rows of n values (row r at x + r * n). Each row: squares in float, summed in double in index
// order, the scale in float: the order other GGUF engines use, so results agree to the last bit
// (activation quantization downstream amplifies any difference). The rows' sums are independent
// chains of double additions, so taking several rows together overlaps their latencies without
// changing any row's order.
template <int R>
void norm_rows(const float* x, const float* weight, float* out, int64_t n, float eps) {
  double sum[R] = {};
  for (int64_t i = 0; i < n; ++i) {
    for (int r = 0; r < R; ++r) sum[r] += static_cast<double>(x[r * n + i] * x[r * n + i]);
  }
  for (int r = 0; r < R; ++r) {
    const float mean = static_cast<float>(sum[r] / static_cast<double>(n));
    const float scale = 1.0f / std::sqrt(mean + eps);
    const float* xr = x + r * n;
    float* o = out + r * n;
    if (weight) {
      for (int64_t i = 0; i < n; ++i) o[i] = (xr[i] * scale) * weight[i];
    } else {
      for (int64_t i = 0; i < n; ++i) o[i] = xr[i] * scale;
    }
  }
}

}  // namespace

void rms_norm(const float* x, const float* weight, float* out, int64_t n, float eps) {
  norm_rows<1>(x, weight, out, n, eps);
}

void rms_norm_rows(const float* x, const float* weight, float* out, int64_t rows, int64_t n,
                   float eps) {
  constexpr int kTogether = 4;
  int64_t r = 0;
  for (; r + kTogether <= rows; r += kTogether)
    norm_rows<kTogether>(x + r * n, weight, out + r * n, n, eps);
  for (; r < rows; ++r) norm_rows<1>(x + r * n, weight, out + r * n, n, eps);
}

}  // namespace strata::ops
