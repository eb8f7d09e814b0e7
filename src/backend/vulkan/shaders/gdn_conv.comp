#version 460
// Causal depthwise convolution + SiLU of the Gated DeltaNet (ops::causal_conv1d_silu), for
// several runs (consecutive tokens of one sequence) per dispatch:
//   out[t][c] = silu(sum_j weight[j][c] * x[t - (kernel-1) + j][c])   (oldest input first)
// where inputs before a run's first token come from its state ([kernel-1][channels], oldest row
// first), token t's input is x + t * stride and its output out + t * stride (out != x). On
// return the state holds the run's last kernel-1 inputs.
// runs: per run 6 words {begin, n_tokens, conv_state lo, hi, ssm_state lo, hi} (GpuGdnRun).
// Grid: x = blocks of 64 channels, y = chunks of CHUNK tokens, z = run. Outputs depend on inputs
// only, so chunks run in parallel; only chunk 0 reads the old state (CHUNK >= kernel-1), and
// each of its threads writes its own channel's new state after reading it.
#include "common.glsl"
#define MAX_KERNEL 8
#define MAX_HIST 7
#define CHUNK 32u
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  uint64_t x, out_, weight, runs;
  uint stride, channels, kernel;
} pc;

uint64_t run_address(uint r, uint word) {
  return uint64_t(Uints(pc.runs).v[6u * r + word]) |
         (uint64_t(Uints(pc.runs).v[6u * r + word + 1u]) << 32);
}

void main() {
  const uint c = gl_WorkGroupID.x * 64u + gl_LocalInvocationID.x;
  if (c >= pc.channels) return;  // no barriers below
  const uint r = gl_WorkGroupID.z;
  const uint begin = Uints(pc.runs).v[6u * r], count = Uints(pc.runs).v[6u * r + 1u];
  const uint t0 = gl_WorkGroupID.y * CHUNK;
  if (t0 >= count) return;
  const uint t1 = min(count, t0 + CHUNK);
  const uint hist = pc.kernel - 1u;
  const uint64_t state = run_address(r, 2u);

  float w[MAX_KERNEL];
  for (uint j = 0u; j < MAX_KERNEL; ++j)
    w[j] = j < pc.kernel ? ldf(pc.weight, uint64_t(j) * pc.channels + c) : 0.0;
  // old[i]: state row i of this channel (only chunk 0 reads the state).
  float old[MAX_HIST];
  for (uint i = 0u; i < MAX_HIST; ++i)
    old[i] = t0 == 0u && i < hist ? ldf(state, uint64_t(i) * pc.channels + c) : 0.0;
  // win[i]: the input of token t0 - hist + i, oldest first.
  float win[MAX_HIST];
  for (uint i = 0u; i < MAX_HIST; ++i) {
    win[i] = 0.0;
    if (i < hist) {
      const int idx = int(t0) - int(hist) + int(i);
      win[i] = idx >= 0 ? ldf(pc.x, uint64_t(begin + uint(idx)) * pc.stride + c)
                        : old[hist - uint(-idx)];
    }
  }
  for (uint t = t0; t < t1; ++t) {
    const float cur = ldf(pc.x, uint64_t(begin + t) * pc.stride + c);
    float acc = hist > 0u ? win[0] * w[0] : cur * w[0];
    for (uint j = 1u; j < MAX_KERNEL; ++j) {
      if (j < hist) acc += win[j] * w[j];
      else if (j == hist) acc += cur * w[j];
    }
    stf(pc.out_, uint64_t(begin + t) * pc.stride + c, acc / (1.0 + exp(-acc)));
    for (uint i = 0u; i < MAX_HIST; ++i) {
      if (i + 1u < hist) win[i] = win[i + 1u];
      else if (i + 1u == hist) win[i] = cur;
    }
  }
  if (t0 != 0u) return;
  // New state: the last hist inputs, from the run's tokens or (short runs) the old state.
  for (uint i = 0u; i < MAX_HIST; ++i) {
    if (i < hist) {
      const int idx = int(count) - int(hist) + int(i);
      const float v = idx >= 0 ? ldf(pc.x, uint64_t(begin + uint(idx)) * pc.stride + c)
                               : old[hist - uint(-idx)];
      stf(state, uint64_t(i) * pc.channels + c, v);
    }
  }
}
