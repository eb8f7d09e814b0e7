#version 460
// Prompt batches: Y = X W^T tiled, 32 weight rows x 64 tokens per workgroup. Each step decodes one
// 32-element group of the tile's rows into shared memory once (instead of once per 8 tokens as
// matmul.comp does) and stages the 64 tokens' 32 activations beside it; each of the 256 threads
// accumulates a 2 x 4 block of outputs. Plain shared memory and FMAs: correct for any subgroup
// size; 17 KiB of shared memory (GpuOps checks the device's limit).
//
// Every output is summed in exactly matmul.comp's order, so a token's results do not depend on
// the kernel its batch size picks (decode and prefill agree bit for bit): matmul.comp's 64
// threads each sum the groups g = j, j + 64, ... (j = thread), then a tree adds thread j + 32 to
// j, j + 16 to j, ... Here the groups of leaf j are visited together, the leaves in bit-reversed
// order (so the tree's pairs arrive next to each other), and a binary counter of partial sums
// (`stack`) forms the same tree as the leaves stream in.
//
// Dense mode (tiles == 0): tile z covers tokens [64 z, 64 z + 64) of x and y.
// Grouped-expert mode (tiles != 0, MoE prompts): tiles[z] = {expert, start, count} (see
// moe_group.comp) covers the pairs order[start .. start + count) of one expert; pair p reads
// activation row p / x_div and writes y row p, with weights expert * expert_stride further on.
// Tiles past tiles' count (the header word) exit at once (the grid is an upper bound).
// SWIGLU builds: y = silu(W x) * (W2 x), gate and up of one type in one pass.
#include "common.glsl"
#include "quant_types.glsl"

#define BM 32u
#define BN 64u
#define THREADS 256u
#define LEAVES 64u  // matmul.comp's threads
#define LEVELS 6u   // log2(LEAVES)
layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint64_t w, w2, x, y, tiles, order, expert_stride;
  uint rows, cols, n_tok, x_stride, y_stride, x_div;
} pc;

shared float ws[BM][33];
#ifdef SWIGLU
shared float ws2[BM][33];
#endif
shared float xs[BN][33];
shared uint x_row[BN], y_row[BN];

uint64_t w_base, w2_base;
uint row0, n, tid;
uint64_t row_bytes;

// Stages group g of the tile's rows and tokens in shared memory.
void stage(uint g) {
  const uint groups_per_block = BLOCK_ELEMS / 32u;
  const uint64_t block = uint64_t(g / groups_per_block) * BLOCK_BYTES;
  float wv[32];
  if (tid < BM) {
    const uint row = row0 + tid;
    if (row < pc.rows) {
      dequant_group(w_base + uint64_t(row) * row_bytes + block, g % groups_per_block, wv);
      for (uint l = 0u; l < 32u; ++l) ws[tid][l] = wv[l];
    } else {
      for (uint l = 0u; l < 32u; ++l) ws[tid][l] = 0.0;
    }
  }
#ifdef SWIGLU
  else if (tid < 2u * BM) {
    const uint r = tid - BM, row = row0 + r;
    if (row < pc.rows) {
      dequant_group(w2_base + uint64_t(row) * row_bytes + block, g % groups_per_block, wv);
      for (uint l = 0u; l < 32u; ++l) ws2[r][l] = wv[l];
    } else {
      for (uint l = 0u; l < 32u; ++l) ws2[r][l] = 0.0;
    }
  }
#endif
  for (uint e = tid; e < BN * 32u; e += THREADS) {
    const uint t = e / 32u, l = e % 32u;
    xs[t][l] = t < n ? ldf(pc.x, uint64_t(x_row[t]) * pc.x_stride + g * 32u + l) : 0.0;
  }
}

void main() {
  row0 = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * BM;
  if (row0 >= pc.rows) return;  // uniform per workgroup
  tid = gl_LocalInvocationID.x;
  const uint z = gl_WorkGroupID.z;
  const uint n_groups = pc.cols / 32u;
  row_bytes = uint64_t(pc.cols / BLOCK_ELEMS) * BLOCK_BYTES;

  w_base = pc.w;
  w2_base = pc.w2;
  if (pc.tiles != 0ul) {
    if (z >= Uints(pc.tiles).v[0]) return;  // uniform: past the last tile
    const uint expert = Uints(pc.tiles).v[1u + 3u * z];
    const uint start = Uints(pc.tiles).v[2u + 3u * z];
    n = Uints(pc.tiles).v[3u + 3u * z];
    if (expert == 0xffffffffu) {  // experts not resident here (moe_group's last bucket): zeros
      for (uint e = tid; e < BM * n; e += THREADS) {
        const uint row = row0 + e % BM, pair = Uints(pc.order).v[start + e / BM];
        if (row < pc.rows) stf(pc.y, uint64_t(pair) * pc.y_stride + row, 0.0);
      }
      return;
    }
    w_base += uint64_t(expert) * pc.expert_stride;
    w2_base += uint64_t(expert) * pc.expert_stride;
    if (tid < n) {
      const uint pair = Uints(pc.order).v[start + tid];
      x_row[tid] = pair / pc.x_div;
      y_row[tid] = pair;
    }
  } else {
    n = min(BN, pc.n_tok - z * BN);
    if (tid < n) {
      x_row[tid] = z * BN + tid;
      y_row[tid] = z * BN + tid;
    }
  }
  barrier();

  // This thread's 2 x 4 block: rows r0, r0 + 1 of the tile, tokens c0 .. c0 + 3.
  const uint r0 = (tid % 16u) * 2u, c0 = (tid / 16u) * 4u;
  float stack[LEVELS][2][4], stack2[LEVELS][2][4];
  float leaf[2][4], leaf2[2][4];
  for (uint jj = 0u; jj < LEAVES; ++jj) {
    const uint j = bitfieldReverse(jj) >> (32u - LEVELS);
    for (uint i = 0u; i < 2u; ++i)
      for (uint c = 0u; c < 4u; ++c) {
        leaf[i][c] = 0.0;
        leaf2[i][c] = 0.0;
      }
    for (uint g = j; g < n_groups; g += LEAVES) {  // uniform: the same groups for every thread
      stage(g);
      barrier();
      // The 2 x 4 products of the group, each summed over l in order as before; every shared
      // value is loaded once per l for all of them (not once per product: on lavapipe each
      // shared load is a gather, and they were 16x the cost of the rest of the step).
      precise float s[2][4], s2[2][4];
      for (uint i = 0u; i < 2u; ++i)
        for (uint c = 0u; c < 4u; ++c) {
          s[i][c] = 0.0;
          s2[i][c] = 0.0;
        }
      for (uint l = 0u; l < 32u; ++l) {
        const float w0 = ws[r0][l], w1 = ws[r0 + 1u][l];
#ifdef SWIGLU
        const float u0 = ws2[r0][l], u1 = ws2[r0 + 1u][l];
#endif
        for (uint c = 0u; c < 4u; ++c) {
          const float xv = xs[c0 + c][l];
          s[0][c] = fma(w0, xv, s[0][c]);
          s[1][c] = fma(w1, xv, s[1][c]);
#ifdef SWIGLU
          s2[0][c] = fma(u0, xv, s2[0][c]);
          s2[1][c] = fma(u1, xv, s2[1][c]);
#endif
        }
      }
      for (uint i = 0u; i < 2u; ++i)
        for (uint c = 0u; c < 4u; ++c) {
          leaf[i][c] += s[i][c];
          leaf2[i][c] += s2[i][c];
        }
      barrier();
    }
    // Binary counter: leaf jj closes one subtree per trailing 1 bit of jj.
    uint level = 0u;
    for (uint b = jj; (b & 1u) != 0u; b >>= 1u, ++level) {
      for (uint i = 0u; i < 2u; ++i)
        for (uint c = 0u; c < 4u; ++c) {
          leaf[i][c] = stack[level][i][c] + leaf[i][c];
          leaf2[i][c] = stack2[level][i][c] + leaf2[i][c];
        }
    }
    if (level < LEVELS) {
      for (uint i = 0u; i < 2u; ++i)
        for (uint c = 0u; c < 4u; ++c) {
          stack[level][i][c] = leaf[i][c];
          stack2[level][i][c] = leaf2[i][c];
        }
    }
  }
  // After the last leaf (jj = 63, six trailing 1 bits) `leaf` holds the whole tree.
  for (uint c = 0u; c < 4u; ++c) {
    const uint t = c0 + c;
    if (t >= n) break;
    for (uint i = 0u; i < 2u; ++i) {
      const uint row = row0 + r0 + i;
      if (row >= pc.rows) break;
      float r = leaf[i][c];
#ifdef SWIGLU
      r = r / (1.0 + exp(-r)) * leaf2[i][c];
#endif
      stf(pc.y, uint64_t(y_row[t]) * pc.y_stride + row, r);
    }
  }
}
