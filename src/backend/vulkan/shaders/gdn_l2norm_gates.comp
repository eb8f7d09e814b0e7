#version 460
// The per-token work between the Gated DeltaNet's convolution and its recurrence, in place:
//  - workgroup (t, i), i < 2 * n_k_heads: head i of token t's q heads then k heads (d_k values
//    each, contiguous from qk + t * stride) becomes x / max(||x||_2, eps), times q_scale for
//    the q heads (ops::l2_norm);
//  - workgroup (t, 2 * n_k_heads): the gates of token t's value heads (ops::delta_gates):
//    beta = sigmoid(b), g = a_neg * softplus(a + dt_bias); b, a at [t * ba_stride + h],
//    beta, g at [t * n_v_heads + h].
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint64_t qk, b, a, a_neg, dt_bias, beta, g;
  uint n_tok, stride, n_k_heads, d_k, n_v_heads, ba_stride;
  float eps, q_scale;
} pc;
shared float red[64];

// log(1 + y) to full float precision also for small y (log(1 + y) alone loses it in 1 + y).
float log1p_accurate(float y) {
  const float u = 1.0 + y;
  return u == 1.0 ? y : log(u) * (y / (u - 1.0));
}

void main() {
  const uint per_token = 2u * pc.n_k_heads + 1u;
  const uint item = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (item >= pc.n_tok * per_token) return;  // uniform per workgroup
  const uint t = item / per_token, i = item % per_token, tid = gl_LocalInvocationID.x;

  if (i == 2u * pc.n_k_heads) {
    for (uint h = tid; h < pc.n_v_heads; h += 64u) {
      const uint64_t in_ = uint64_t(t) * pc.ba_stride + h, o = uint64_t(t) * pc.n_v_heads + h;
      const float bv = ldf(pc.b, in_);
      stf(pc.beta, o, 1.0 / (1.0 + exp(-bv)));
      const float x = ldf(pc.a, in_) + Floats(pc.dt_bias).v[h];
      const float softplus = x > 20.0 ? x : log1p_accurate(exp(x));
      stf(pc.g, o, softplus * Floats(pc.a_neg).v[h]);
    }
    return;
  }

  const uint64_t base = uint64_t(t) * pc.stride + uint64_t(i) * pc.d_k;
  float s = 0.0;
  for (uint e = tid; e < pc.d_k; e += 64u) {
    const float v = ldf(pc.qk, base + e);
    s += v * v;
  }
  red[tid] = s;
  barrier();
  for (uint half_ = 32u; half_ > 0u; half_ /= 2u) {
    if (tid < half_) red[tid] += red[tid + half_];
    barrier();
  }
  const float scale = (i < pc.n_k_heads ? pc.q_scale : 1.0) / max(sqrt(red[0]), pc.eps);
  for (uint e = tid; e < pc.d_k; e += 64u) stf(pc.qk, base + e, ldf(pc.qk, base + e) * scale);
}
