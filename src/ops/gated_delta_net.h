#pragma once
// Gated DeltaNet (linear attention with a delta-rule state), as in Qwen3-Next and Qwen3.5/3.6:
// the pieces of a recurrent layer that are not matrix products. All state is FP32.
//
// Per value head h and token t, with S (d_k x d_v) the head's state:
//   S <- e^g S;  delta = beta (v - S^T k);  S <- S + k delta^T;  o = S^T q   (q pre-scaled)
// Here S is stored transposed, [d_v][d_k]: row j is column j of S, so every product over d_k
// is a contiguous dot product and a decode step streams the 64 KiB (d = 128) state once.

#include <cstdint>
#include <span>

namespace strata::ops {

constexpr int64_t kMaxConvKernel = 8;
constexpr int64_t kDeltaChunk = 64;  // tokens per chunk of the chunked prefill form

// Causal depthwise convolution of one sequence's tokens over channels [c0, c1), then SiLU:
//   out[t][c] = silu(sum_j weight[j][c] * x[t - (kernel-1) + j][c])   (oldest input first)
// where inputs before the first token come from `state` ([kernel-1][channels], oldest row
// first). Token t's input is x + t * stride and its output out + t * stride (out != x). On
// return the state holds the last kernel-1 inputs of channels [c0, c1).
void causal_conv1d_silu(const float* x, float* out, int64_t stride, int64_t n_tokens, int64_t c0,
                        int64_t c1, const float* weight, int64_t kernel, int64_t channels,
                        float* state);

// x /= max(||x||_2, eps), then x *= scale.
void l2_norm(float* x, int64_t n, float eps, float scale = 1.0f);

// Per head: beta = sigmoid(b), g = a_neg * softplus(a + dt_bias) (a_neg = -exp(A_log) <= 0).
void delta_gates(const float* b, const float* a, const float* a_neg, const float* dt_bias,
                 int64_t n_heads, float* beta, float* g);

// x = rms_norm(x) * weight * silu(z) over n values (the gated output norm of a GDN head).
void gated_rms_norm(float* x, const float* weight, const float* z, int64_t n, float eps);

// The inputs of one value head over a run of consecutive tokens of one sequence: token t's
// vectors at q + t * qk_stride, k + t * qk_stride, v + t * v_stride, its gates at
// beta[t * gate_stride], g[t * gate_stride], and its output at out + t * out_stride.
struct DeltaRuleRun {
  const float* q = nullptr;  // [d_k], L2-normalized and scaled by 1/sqrt(d_k)
  const float* k = nullptr;  // [d_k], L2-normalized
  const float* v = nullptr;  // [d_v]
  int64_t qk_stride = 0, v_stride = 0;
  const float* beta = nullptr;
  const float* g = nullptr;
  int64_t gate_stride = 0;
  float* out = nullptr;  // [d_v]
  int64_t out_stride = 0;
  int64_t n_tokens = 0;
};

// The recurrence one token at a time (the fused decode step, also used for prefill): the state
// stays resident in cache across the run, and results do not depend on how a sequence is split
// into batches.
void delta_rule_sequential(float* state, const DeltaRuleRun& run, int64_t d_k, int64_t d_v);

// The same recurrence in chunks of kDeltaChunk tokens (the WY / UT-transform form): within a
// chunk the token interactions are small dense products, and the state is read and written
// once per chunk instead of once per token. Agrees with the sequential form to rounding.
void delta_rule_chunked(float* state, const DeltaRuleRun& run, int64_t d_k, int64_t d_v);

// Portable versions of the above (the reference the fast paths are tested against).
void delta_rule_sequential_reference(float* state, const DeltaRuleRun& run, int64_t d_k,
                                     int64_t d_v);

}  // namespace strata::ops
