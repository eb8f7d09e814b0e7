#version 460
// The gated output norm of the Gated DeltaNet (ops::gated_rms_norm), in place, one workgroup
// per (token, value head): x = x / sqrt(mean(x^2) + eps) * weight * silu(z) over d_v values,
// x at x + t * x_stride + h * d_v, z at z + t * z_stride + h * d_v, weight [d_v] shared by heads.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint64_t x, weight, z;
  uint n_tok, n_heads, d_v, x_stride, z_stride;
  float eps;
} pc;
shared float red[64];

void main() {
  const uint item = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (item >= pc.n_tok * pc.n_heads) return;  // uniform per workgroup
  const uint t = item / pc.n_heads, h = item % pc.n_heads, tid = gl_LocalInvocationID.x;
  const uint64_t xi = uint64_t(t) * pc.x_stride + h * pc.d_v;
  const uint64_t zi = uint64_t(t) * pc.z_stride + h * pc.d_v;
  float s = 0.0;
  for (uint e = tid; e < pc.d_v; e += 64u) {
    const float v = ldf(pc.x, xi + e);
    s += v * v;
  }
  red[tid] = s;
  barrier();
  for (uint half_ = 32u; half_ > 0u; half_ /= 2u) {
    if (tid < half_) red[tid] += red[tid + half_];
    barrier();
  }
  const float scale = 1.0 / sqrt(red[0] / float(pc.d_v) + pc.eps);
  for (uint e = tid; e < pc.d_v; e += 64u) {
    const float zv = ldf(pc.z, zi + e);
    const float v = ldf(pc.x, xi + e) * scale * Floats(pc.weight).v[e];
    stf(pc.x, xi + e, v * (zv / (1.0 + exp(-zv))));
  }
}
