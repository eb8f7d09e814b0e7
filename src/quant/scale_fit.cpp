// The symmetric scale search (scale_fit.h), shared by the K-quant and legacy weight quantizers.

#include "quant/scale_fit.h"

#include <algorithm>
#include <cmath>

#include "quant/error_weights.h"
#include "quant/kquants_common.h"
#include "util/fp16.h"

namespace strata::quant {

float round_f16(float x) {
  return f16_to_f32(f32_to_f16(x));
}

float signed_absmax(const float* x, int n) {
  float amax = 0, vmax = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      vmax = x[i];
    }
  }
  return vmax;
}

int quantize_symmetric(float x, float s, int nneg, int npos) {
  if (s == 0) return 0;
  return nearest_int(std::clamp(x / s, -static_cast<float>(nneg), static_cast<float>(npos)));
}

float symmetric_error(const float* x, const int* L, int n, float s, const float* w) {
  float err = 0;
  for (int i = 0; i < n; ++i) {
    const float e = s * static_cast<float>(L[i]) - x[i];
    err += error_weight(w, i) * e * e;
  }
  return err;
}

float fit_symmetric_scale(const float* x, int n, int nneg, int npos, const float* w) {
  const float vmax = signed_absmax(x, n);
  if (vmax == 0) return 0;
  double best_score = -1;
  float best_s = 0;
  int L[32];
  // The extreme value maps to -nneg (using the extra negative level) or to +npos.
  for (int side = 0; side < 2; ++side) {
    const float target = side == 0 ? -static_cast<float>(nneg) : static_cast<float>(npos);
    for (int k = -12; k <= 12; ++k) {
      const float levels = target + (side == 0 ? -0.1f : 0.1f) * static_cast<float>(k);
      float s = vmax / levels;
      for (int iter = 0; iter < 3; ++iter) {
        double sxl = 0, sll = 0;
        for (int i = 0; i < n; ++i) {
          L[i] = quantize_symmetric(x[i], s, nneg, npos);
          sxl += error_weight(w, i) * static_cast<double>(x[i]) * L[i];
          sll += error_weight(w, i) * static_cast<double>(L[i]) * L[i];
        }
        if (sll == 0) break;
        const double score = sxl * sxl / sll;
        if (score > best_score) {
          best_score = score;
          best_s = static_cast<float>(sxl / sll);
        }
        s = static_cast<float>(sxl / sll);
      }
    }
  }
  return best_s;
}

}  // namespace strata::quant
