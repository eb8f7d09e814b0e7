#version 460
// Groups a prompt's (token, expert) pairs by expert for matmul_tiled.comp: order lists the pairs
// expert by expert, and tiles = {count, then per tile {expert, start, n}} cuts each expert's run
// into tiles of at most 64 pairs. One workgroup: shared-memory counts, a serial prefix sum over
// the experts (a few hundred), then each pair takes its place with an atomic cursor. The order
// within an expert varies from run to run; every output row is computed on its own, so results
// do not depend on it. With a slot map (slots != 0) pairs are grouped by their expert's slot,
// and the pairs of experts not resident (slot -1) go to a last bucket whose tiles name expert
// 0xffffffff: matmul_tiled.comp writes zeros for them.
#include "common.glsl"
#define MAX_EXPERTS 512u
#define TILE 64u
layout(local_size_x = 256) in;
layout(push_constant) uniform Push {
  uint64_t ids, order, tiles, slots;
  uint n_pairs, n_expert;  // n_expert: buckets (with a slot map: resident slots + 1)
} pc;

uint bucket(uint p) {
  const int e = Ints(pc.ids).v[p];
  if (pc.slots == 0ul) return uint(e);
  const int s = Ints(pc.slots).v[e];
  return s < 0 ? pc.n_expert - 1u : uint(s);
}

shared uint counts[MAX_EXPERTS], offsets[MAX_EXPERTS], cursor[MAX_EXPERTS];

void main() {
  const uint tid = gl_LocalInvocationID.x;
  for (uint e = tid; e < pc.n_expert; e += 256u) {
    counts[e] = 0u;
    cursor[e] = 0u;
  }
  barrier();
  for (uint p = tid; p < pc.n_pairs; p += 256u) atomicAdd(counts[bucket(p)], 1u);
  barrier();
  if (tid == 0u) {
    uint start = 0u, n_tiles = 0u;
    for (uint e = 0u; e < pc.n_expert; ++e) {
      offsets[e] = start;
      const uint c = counts[e];
      for (uint s = 0u; s < c; s += TILE) {
        const bool skip = pc.slots != 0ul && e == pc.n_expert - 1u;
        Uints(pc.tiles).v[1u + 3u * n_tiles] = skip ? 0xffffffffu : e;
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
    const uint e = bucket(p);
    Uints(pc.order).v[offsets[e] + atomicAdd(cursor[e], 1u)] = p;
  }
}
