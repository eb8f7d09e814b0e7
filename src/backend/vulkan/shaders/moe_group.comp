#version 460
// Groups a prompt's (token, expert) pairs by expert for matmul_tiled.comp: order lists the pairs
// expert by expert, and tiles = {count, then per tile {expert, start, n}} cuts each expert's run
// into tiles of at most 64 pairs. One workgroup: shared-memory counts, a serial prefix sum over
// the experts (a few hundred), then each pair takes its place with an atomic cursor. The order
// within an expert varies from run to run; every output row is computed on its own, so results
// do not depend on it.
#include "common.glsl"
#define MAX_EXPERTS 512u
#define TILE 64u
layout(local_size_x = 256) in;
layout(push_constant) uniform Push {
  uint64_t ids, order, tiles;
  uint n_pairs, n_expert;
} pc;

shared uint counts[MAX_EXPERTS], offsets[MAX_EXPERTS], cursor[MAX_EXPERTS];

void main() {
  const uint tid = gl_LocalInvocationID.x;
  for (uint e = tid; e < pc.n_expert; e += 256u) {
    counts[e] = 0u;
    cursor[e] = 0u;
  }
  barrier();
  for (uint p = tid; p < pc.n_pairs; p += 256u) atomicAdd(counts[uint(Ints(pc.ids).v[p])], 1u);
  barrier();
  if (tid == 0u) {
    uint start = 0u, n_tiles = 0u;
    for (uint e = 0u; e < pc.n_expert; ++e) {
      offsets[e] = start;
      const uint c = counts[e];
      for (uint s = 0u; s < c; s += TILE) {
        Uints(pc.tiles).v[1u + 3u * n_tiles] = e;
        Uints(pc.tiles).v[2u + 3u * n_tiles] = start + s;
        Uints(pc.tiles).v[3u + 3u * n_tiles] = min(TILE, c - s);
        ++n_tiles;
      }
      start += c;
    }
    Uints(pc.tiles).v[0] = n_tiles;
  }
  barrier();
  for (uint p = tid; p < pc.n_pairs; p += 256u) {
    const uint e = uint(Ints(pc.ids).v[p]);
    Uints(pc.order).v[offsets[e] + atomicAdd(cursor[e], 1u)] = p;
  }
}
