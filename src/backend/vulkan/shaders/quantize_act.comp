#version 460
// Activations rounded exactly as the CPU quantizes them for a weight type's partner format, and
// written back as floats: products with these values are the CPU's integer dot products up to
// float summation order, so GPU and CPU take the same router decisions. One invocation per block.
//   ACT_Q8_0 (also Q8_1's codes): d = amax / 127 (stored as f16), q = round(x / d), ties away
//   ACT_Q8_K: the largest-magnitude element maps to -127, q = nearest-even, d = 1 / iscale (f32)
//   ACT_F16 / ACT_BF16: each value rounded to the 16-bit format
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint64_t x, out_;
  uint rows, cols, x_stride, out_stride;
} pc;

#if defined(ACT_Q8_K)
#define BLOCK 256u
#elif defined(ACT_Q8_0)
#define BLOCK 32u
#else
#define BLOCK 32u
#endif

float bf16_round(float f) {
  uint bits = floatBitsToUint(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return f;
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uintBitsToFloat(bits & 0xffff0000u);
}

void main() {
  const uint blocks = pc.cols / BLOCK;
  const uint id = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
  if (id >= pc.rows * blocks) return;
  const uint r = id / blocks, b = id % blocks;
  const uint64_t src = uint64_t(r) * pc.x_stride + b * BLOCK;
  const uint64_t dst = uint64_t(r) * pc.out_stride + b * BLOCK;
#if defined(ACT_Q8_0)
  float amax = 0.0;
  for (uint l = 0u; l < BLOCK; ++l) amax = max(amax, abs(ldf(pc.x, src + l)));
  const float d = amax / 127.0;
  const float inv = d != 0.0 ? 1.0 / d : 0.0;
  const float d16 = unpackHalf2x16(packHalf2x16(vec2(d, 0.0))).x;
  for (uint l = 0u; l < BLOCK; ++l) {
    const float v = ldf(pc.x, src + l) * inv;
    stf(pc.out_, dst + l, d16 * (sign(v) * floor(abs(v) + 0.5)));
  }
#elif defined(ACT_Q8_K)
  float amax = 0.0, vmax = 0.0;
  for (uint l = 0u; l < BLOCK; ++l) {
    const float v = ldf(pc.x, src + l);
    if (abs(v) > amax) {
      amax = abs(v);
      vmax = v;
    }
  }
  if (amax == 0.0) {
    for (uint l = 0u; l < BLOCK; ++l) stf(pc.out_, dst + l, 0.0);
    return;
  }
  const float iscale = -127.0 / vmax;
  const float d = 1.0 / iscale;
  for (uint l = 0u; l < BLOCK; ++l) {
    const float q = min(127.0, roundEven(iscale * ldf(pc.x, src + l)));
    stf(pc.out_, dst + l, q * d);
  }
#elif defined(ACT_F16)
  for (uint l = 0u; l < BLOCK; ++l)
    stf(pc.out_, dst + l, unpackHalf2x16(packHalf2x16(vec2(ldf(pc.x, src + l), 0.0))).x);
#elif defined(ACT_BF16)
  for (uint l = 0u; l < BLOCK; ++l) stf(pc.out_, dst + l, bf16_round(ldf(pc.x, src + l)));
#else
#error "quantize_act.comp: define one ACT_*"
#endif
}
