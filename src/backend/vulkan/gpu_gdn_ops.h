#pragma once
// Recording of the Gated DeltaNet (linear attention) kernels of qwen35moe / qwen3next: the
// parts of a recurrent layer that are not matrix products. Each mirrors a CPU function in
// ops/gated_delta_net.h, its reference in tests/unit/vulkan/gpu_gdn_test.cpp.
//
// Several runs (consecutive tokens of one sequence, in order) go into one call. They are
// described by a device array of GpuGdnRun, one per run; token rows of the activations are
// absolute (run r owns rows [begin, begin + n_tokens)). A run's state is reached by address, so
// every sequence's state may live anywhere (a slot of a state pool), and has the float layout
// of the CPU's RecurrentRun, so host snapshots of it stay interchangeable:
//   conv_state [conv_kernel - 1][conv_dim]       (oldest input row first)
//   ssm_state  [n_v_heads][d_v][d_k]             (S of each value head, transposed)

#include <cstdint>

#include "backend/vulkan/device.h"

namespace strata::vk {

// One run of a batch, as the kernels read it (24 bytes, little-endian; the kernels read it as
// 6 32-bit words, so 4-byte alignment suffices).
struct GpuGdnRun {
  int32_t begin = 0;        // first token row of the run in the batch
  int32_t n_tokens = 0;     // 0: the run is skipped, its state unchanged
  uint64_t conv_state = 0;  // device address of [conv_kernel - 1][conv_dim] floats
  uint64_t ssm_state = 0;   // device address of [n_v_heads][d_v][d_k] floats
};
static_assert(sizeof(GpuGdnRun) == 24);

struct GpuGdnOps {
  Device& device;
  CommandList& cmd;

  // ops::causal_conv1d_silu over all `channels` of every run: out[t][c] (at out + t * stride) =
  // silu(sum_j weight[j][c] x[t - (kernel-1) + j][c]) with inputs before a run's first token
  // from its conv_state, which then holds the run's last kernel-1 inputs. out != x.
  // n_tok: the batch's token count (an upper bound of every run's length). kernel <= 8.
  void conv_silu(uint64_t x, uint64_t out, int64_t stride, uint64_t weight, int64_t kernel,
                 int64_t channels, uint64_t runs, int64_t n_runs, int64_t n_tok);

  // In place, per token t < n_tok: the 2 * n_k_heads heads of d_k values from qk + t * stride
  // (q heads, then k heads) become ops::l2_norm(x, d_k, eps, scale), scale q_scale for q heads
  // and 1 for k heads; and ops::delta_gates of its n_v_heads value heads: b, a at
  // [t * ba_stride + h], a_neg, dt_bias [n_v_heads], beta and g written at [t * n_v_heads + h].
  void l2norm_gates(uint64_t qk, int64_t stride, int64_t n_tok, int64_t n_k_heads, int64_t d_k,
                    float eps, float q_scale, uint64_t b, uint64_t a, int64_t ba_stride,
                    uint64_t a_neg, uint64_t dt_bias, int64_t n_v_heads, uint64_t beta, uint64_t g);

  // ops::delta_rule_sequential for every (run, value head), the run's tokens in order, on the
  // run's ssm_state. Token t of value head h reads q + t * qk_stride + kh * d_k and k likewise
  // (kh = h % n_k_heads when k_head_modulo, else h / (n_v_heads / n_k_heads)),
  // v + t * v_stride + h * d_v, beta[t * gate_stride + h], g[t * gate_stride + h], and writes
  // out + t * out_stride + h * d_v. d_k <= 256.
  void delta_rule(uint64_t q, uint64_t k, int64_t qk_stride, uint64_t v, int64_t v_stride,
                  uint64_t beta, uint64_t g, int64_t gate_stride, uint64_t out, int64_t out_stride,
                  uint64_t runs, int64_t n_runs, int64_t n_k_heads, int64_t n_v_heads, int64_t d_k,
                  int64_t d_v, bool k_head_modulo);

  // In place, ops::gated_rms_norm of every (token, head): x + t * x_stride + h * d_v with
  // weight [d_v] and gate z + t * z_stride + h * d_v.
  void gated_norm(uint64_t x, int64_t x_stride, uint64_t weight, uint64_t z, int64_t z_stride,
                  int64_t n_tok, int64_t n_heads, int64_t d_v, float eps);
};

}  // namespace strata::vk
