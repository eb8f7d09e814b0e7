#version 460
// Small per-element ops, one build per OP_*:
//   OP_ADD:      x[i] += y[i]
//   OP_SWIGLU:   x[i] = silu(x[i]) * y[i]
//   OP_SIGMOID_MUL: x[i] *= sigmoid(y[i])  (gated attention output)
//   OP_ADD_BIAS: x[i] += y[i % cols]  (a bias added to every row of cols values)
//   OP_SWIGLU_OAI: gpt-oss's clamped SwiGLU, g = min(x[i], 7), u = clamp(y[i], -7, 7),
//                  x[i] = g * sigmoid(1.702 g) * (u + 1)
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint64_t x, y;
  uint n, cols;
} pc;

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
  if (i >= pc.n) return;
  const float a = Floats(pc.x).v[i];
#if defined(OP_ADD_BIAS)
  const float b = Floats(pc.y).v[i % pc.cols];
#else
  const float b = Floats(pc.y).v[i];
#endif
#if defined(OP_ADD) || defined(OP_ADD_BIAS)
  Floats(pc.x).v[i] = a + b;
#elif defined(OP_SWIGLU)
  Floats(pc.x).v[i] = a / (1.0 + exp(-a)) * b;
#elif defined(OP_SWIGLU_OAI)
  const float g = min(a, 7.0), u = clamp(b, -7.0, 7.0);
  Floats(pc.x).v[i] = g / (1.0 + exp(-1.702 * g)) * (u + 1.0);
#elif defined(OP_SIGMOID_MUL)
  Floats(pc.x).v[i] = a / (1.0 + exp(-b));
#else
#error "elementwise.comp: define one OP_*"
#endif
}
