#version 460
// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight, one workgroup per row (rows of `cols`;
// per-head q/k norms are rows of head_dim). weight == 0: no weight.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint64_t x, weight, out_;
  uint rows, cols, x_stride, out_stride;
  float eps;
} pc;
shared float red[64];

void main() {
  const uint r = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (r >= pc.rows) return;
  const uint tid = gl_LocalInvocationID.x;
  const uint64_t xi = uint64_t(r) * pc.x_stride, oi = uint64_t(r) * pc.out_stride;
  float s = 0.0;
  for (uint i = tid; i < pc.cols; i += 64u) {
    const float v = ldf(pc.x, xi + i);
    s += v * v;
  }
  red[tid] = s;
  barrier();
  for (uint stride = 32u; stride > 0u; stride /= 2u) {
    if (tid < stride) red[tid] += red[tid + stride];
    barrier();
  }
  const float scale = 1.0 / sqrt(red[0] / float(pc.cols) + pc.eps);
  for (uint i = tid; i < pc.cols; i += 64u) {
    float v = ldf(pc.x, xi + i) * scale;
    if (pc.weight != 0ul) v *= Floats(pc.weight).v[i];
    stf(pc.out_, oi + i, v);
  }
}
