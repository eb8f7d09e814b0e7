#pragma once

#include <cstdint>

namespace strata::ops {

// out[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + e^-x). out may alias gate or up.
void swiglu(const float* gate, const float* up, float* out, int64_t n);

// gpt-oss's clamped SwiGLU: g = min(gate, limit), u = clamp(up, -limit, limit),
// out = g * sigmoid(alpha * g) * (u + 1). out may alias gate or up.
void swiglu_oai(const float* gate, const float* up, float* out, int64_t n, float alpha,
                float limit);
// In-place softmax over n values.
void softmax(float* x, int64_t n);

// y += a * x
void axpy(float a, const float* x, float* y, int64_t n);

}  // namespace strata::ops
