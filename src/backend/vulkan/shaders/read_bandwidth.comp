#version 460
// Reads n vec4s at x (grid-stride, 16-byte loads) and writes one sum per workgroup to out, so
// the reads cannot be optimized away: a device's sustained read bandwidth (bandwidth_probe.h).
#include "common.glsl"
layout(local_size_x = 256) in;
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Vec4s { vec4 v[]; };
layout(push_constant) uniform Push {
  uint64_t x, out_;
  uint n;  // vec4s (< 2^32: the buffer is at most a few hundred MiB)
} pc;

shared float partial[256];

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint threads = gl_NumWorkGroups.x * 256u;
  vec4 acc = vec4(0.0);
  for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += threads) acc += Vec4s(pc.x).v[i];
  partial[tid] = acc.x + acc.y + acc.z + acc.w;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) {
    if (tid < s) partial[tid] += partial[tid + s];
    barrier();
  }
  if (tid == 0u) stf(pc.out_, gl_WorkGroupID.x, partial[0]);
}
