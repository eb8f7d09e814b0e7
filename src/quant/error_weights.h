#pragma once
// Internal: the per-value weights of the quantizers' squared error (kquants_scalar.cpp,
// iquants_scalar.cpp). Null weights weigh every value 1, with the same arithmetic bit for bit as
// the unweighted search; otherwise each value counts by its column's importance (strata quantize
// --imatrix).

namespace strata::quant {

inline float error_weight(const float* w, int i) {
  return w ? w[i] : 1.0f;
}

// The weights of the values from `offset` on (null stays null).
inline const float* error_weights_from(const float* w, int offset) {
  return w ? w + offset : nullptr;
}

}  // namespace strata::quant
