#pragma once

#include <cstdint>

namespace strata::ops {

// out[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + e^-x). out may alias gate or up.
void swiglu(const float* gate, const float* up, float* out, int64_t n);

// In-place softmax over n values.
void softmax(float* x, int64_t n);

// y += a * x
void axpy(float a, const float* x, float* y, int64_t n);

}  // namespace strata::ops
