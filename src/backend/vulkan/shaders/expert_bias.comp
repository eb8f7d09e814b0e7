#version 460
// x[p][c] += bias[ids[p]][c]: each (token, expert) pair's row gets its expert's bias (gpt-oss),
// only for the pairs whose expert this stack computes (slots[e] >= 0; slots == 0: every pair), so
// pairs another device computes stay zeros for the sum.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint64_t x, bias, ids, slots;
  uint pairs, cols;
} pc;

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
  if (i >= pc.pairs * pc.cols) return;
  const uint p = i / pc.cols, c = i % pc.cols;
  const int e = Ints(pc.ids).v[p];
  if (pc.slots != 0ul && Ints(pc.slots).v[e] < 0) return;
  Floats(pc.x).v[i] += Floats(pc.bias).v[uint(e) * pc.cols + c];
}
