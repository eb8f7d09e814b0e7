#version 460
// out[i] = row ids[i] of the weight matrix, dequantized (token embeddings).
#include "common.glsl"
#include "quant_types.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint64_t w, ids, out_;
  uint cols, n_rows_w;
} pc;

void main() {
  const uint i = gl_WorkGroupID.x;
  const uint id = uint(Ints(pc.ids).v[i]);
  const uint64_t row_bytes = uint64_t(pc.cols / BLOCK_ELEMS) * BLOCK_BYTES;
  const uint64_t base = pc.w + uint64_t(min(id, pc.n_rows_w - 1u)) * row_bytes;
  float wv[32];
  for (uint g = gl_LocalInvocationID.x; g < pc.cols / 32u; g += 64u) {
    dequant_group(base + uint64_t(g / (BLOCK_ELEMS / 32u)) * BLOCK_BYTES, g % (BLOCK_ELEMS / 32u),
                  wv);
    for (uint l = 0u; l < 32u; ++l) stf(pc.out_, uint64_t(i) * pc.cols + g * 32u + l, wv[l]);
  }
}
