#version 460
// The Gated DeltaNet recurrence one token at a time (ops::delta_rule_sequential), for several
// runs per dispatch. Per value head h the FP32 state S is stored transposed, [d_v][d_k] (row j
// is column j of S), at ssm_state + h * d_v * d_k of the run, exactly as on the CPU. Per token:
//   row_j *= e^g;  m = row_j . k;  row_j += beta (v_j - m) k;  o_j = row_j . q   (q pre-scaled)
// Row j needs only q, k, v_j and the gates, so a head's rows are split over workgroups: grid
// x = blocks of ROWS rows, y = value head, z = run; each workgroup walks the run's tokens in
// order. LANES threads share a row, each keeping its d_k / LANES values in registers for the
// whole run (the state is read and written once per dispatch); the two dot products per token
// are summed through shared memory (no subgroup operations: any subgroup size works).
// Value head h reads k-head h % n_k_heads (k_head_modulo) or h / (n_v_heads / n_k_heads).
// runs: per run 6 words {begin, n_tokens, conv_state lo, hi, ssm_state lo, hi} (GpuGdnRun).
#include "common.glsl"
#define LANES 16u
#define ROWS 4u
#define MAX_SLICE 16  // d_k <= LANES * MAX_SLICE = 256
layout(local_size_x = 64) in;  // LANES * ROWS
layout(push_constant) uniform Push {
  uint64_t q, k, v, beta, g, out_, runs;
  uint qk_stride, v_stride, gate_stride, out_stride;
  uint n_k_heads, n_v_heads, d_k, d_v, k_head_modulo;
} pc;
// Partial dot products; two arrays so that one barrier per product suffices.
shared float partial_m[64];
shared float partial_o[64];

uint64_t run_address(uint r, uint word) {
  return uint64_t(Uints(pc.runs).v[6u * r + word]) |
         (uint64_t(Uints(pc.runs).v[6u * r + word + 1u]) << 32);
}

void main() {
  const uint tid = gl_LocalInvocationID.x, lane = tid % LANES, row = tid / LANES;
  const uint j = gl_WorkGroupID.x * ROWS + row;
  const uint h = gl_WorkGroupID.y, r = gl_WorkGroupID.z;
  const bool live = j < pc.d_v;  // inactive threads compute zeros but join the barriers
  const uint kh =
      pc.k_head_modulo != 0u ? h % pc.n_k_heads : h / (pc.n_v_heads / pc.n_k_heads);
  const uint begin = Uints(pc.runs).v[6u * r], count = Uints(pc.runs).v[6u * r + 1u];
  const uint64_t state =
      run_address(r, 4u) + 4ul * ((uint64_t(h) * pc.d_v + min(j, pc.d_v - 1u)) * pc.d_k);

  float st[MAX_SLICE];
  for (uint s = 0u; s < MAX_SLICE; ++s) {
    const uint i = lane + s * LANES;
    st[s] = live && i < pc.d_k ? Floats(state).v[i] : 0.0;
  }
  for (uint t = 0u; t < count; ++t) {
    const uint64_t tok = uint64_t(begin + t);
    const uint64_t qa = pc.q + 4ul * (tok * pc.qk_stride + kh * pc.d_k);
    const uint64_t ka = pc.k + 4ul * (tok * pc.qk_stride + kh * pc.d_k);
    const float decay = exp(ldf(pc.g, tok * pc.gate_stride + h));
    const float beta = ldf(pc.beta, tok * pc.gate_stride + h);
    float kv[MAX_SLICE];
    float m = 0.0;
    for (uint s = 0u; s < MAX_SLICE; ++s) {
      const uint i = lane + s * LANES;
      kv[s] = i < pc.d_k ? Floats(ka).v[i] : 0.0;
      st[s] *= decay;
      m += st[s] * kv[s];
    }
    partial_m[tid] = m;
    barrier();
    m = 0.0;
    for (uint l = 0u; l < LANES; ++l) m += partial_m[row * LANES + l];
    const float vj = live ? ldf(pc.v, tok * pc.v_stride + h * pc.d_v + j) : 0.0;
    const float delta = beta * (vj - m);
    float o = 0.0;
    for (uint s = 0u; s < MAX_SLICE; ++s) {
      const uint i = lane + s * LANES;
      st[s] += delta * kv[s];
      o += i < pc.d_k ? st[s] * Floats(qa).v[i] : 0.0;
    }
    partial_o[tid] = o;
    barrier();
    if (lane == 0u && live) {
      o = 0.0;
      for (uint l = 0u; l < LANES; ++l) o += partial_o[row * LANES + l];
      stf(pc.out_, tok * pc.out_stride + h * pc.d_v + j, o);
    }
  }
  if (!live) return;
  for (uint s = 0u; s < MAX_SLICE; ++s) {
    const uint i = lane + s * LANES;
    if (i < pc.d_k) Floats(state).v[i] = st[s];
  }
}
