#include "backend/vulkan/gpu_gdn_ops.h"

#include <algorithm>
#include <bit>

#include "util/error.h"

namespace strata::vk {
namespace {

constexpr uint32_t kMaxGroups = 65535;  // the minimum maxComputeWorkGroupCount per dimension
constexpr int64_t kConvChunk = 32;      // tokens per workgroup of gdn_conv (CHUNK)
constexpr int64_t kMaxConvKernel = 8;   // MAX_KERNEL of gdn_conv
constexpr int64_t kDeltaRows = 4;       // state rows per workgroup of gdn_delta_rule (ROWS)
constexpr int64_t kMaxDk = 256;         // LANES * MAX_SLICE of gdn_delta_rule

// Workgroups for `count` items as an (x, y) grid within the per-dimension limit.
void grid(int64_t count, uint32_t& gx, uint32_t& gy) {
  gx = static_cast<uint32_t>(std::min<int64_t>(count, kMaxGroups));
  gy = static_cast<uint32_t>((count + gx - 1) / std::max<uint32_t>(gx, 1));
}

uint32_t u32(int64_t v) {
  return static_cast<uint32_t>(v);
}

void check_groups(int64_t count, const char* what, const char* op) {
  STRATA_CHECK(count >= 1 && count <= kMaxGroups, "GPU {}: {} {} (expected 1..{})", op, count, what,
               kMaxGroups);
}

}  // namespace

void GpuGdnOps::conv_silu(uint64_t x, uint64_t out, int64_t stride, uint64_t weight, int64_t kernel,
                          int64_t channels, uint64_t runs, int64_t n_runs, int64_t n_tok) {
  STRATA_CHECK(kernel >= 1 && kernel <= kMaxConvKernel, "GPU gdn conv: kernel {} is outside 1..{}",
               kernel, kMaxConvKernel);
  if (n_runs == 0 || n_tok == 0) return;
  check_groups(n_runs, "runs", "gdn conv");
  check_groups((n_tok + kConvChunk - 1) / kConvChunk, "token chunks", "gdn conv");
  struct {
    uint64_t x, out, weight, runs;
    uint32_t stride, channels, kernel, pad = 0;
  } p{x, out, weight, runs, u32(stride), u32(channels), u32(kernel)};
  cmd.dispatch(device.kernel("gdn_conv"), p, u32((channels + 63) / 64),
               u32((n_tok + kConvChunk - 1) / kConvChunk), u32(n_runs));
}

void GpuGdnOps::l2norm_gates(uint64_t qk, int64_t stride, int64_t n_tok, int64_t n_k_heads,
                             int64_t d_k, float eps, float q_scale, uint64_t b, uint64_t a,
                             int64_t ba_stride, uint64_t a_neg, uint64_t dt_bias, int64_t n_v_heads,
                             uint64_t beta, uint64_t g) {
  if (n_tok == 0) return;
  struct {
    uint64_t qk, b, a, a_neg, dt_bias, beta, g;
    uint32_t n_tok, stride, n_k_heads, d_k, n_v_heads, ba_stride;
    uint32_t eps, q_scale;  // floats' bits (no padding, see CommandList::dispatch)
  } p{qk,
      b,
      a,
      a_neg,
      dt_bias,
      beta,
      g,
      u32(n_tok),
      u32(stride),
      u32(n_k_heads),
      u32(d_k),
      u32(n_v_heads),
      u32(ba_stride),
      std::bit_cast<uint32_t>(eps),
      std::bit_cast<uint32_t>(q_scale)};
  uint32_t gx, gy;
  grid(n_tok * (2 * n_k_heads + 1), gx, gy);
  cmd.dispatch(device.kernel("gdn_l2norm_gates"), p, gx, gy);
}

void GpuGdnOps::delta_rule(uint64_t q, uint64_t k, int64_t qk_stride, uint64_t v, int64_t v_stride,
                           uint64_t beta, uint64_t g, int64_t gate_stride, uint64_t out,
                           int64_t out_stride, uint64_t runs, int64_t n_runs, int64_t n_k_heads,
                           int64_t n_v_heads, int64_t d_k, int64_t d_v, bool k_head_modulo) {
  STRATA_CHECK(d_k >= 1 && d_k <= kMaxDk, "GPU delta rule: d_k {} is outside 1..{}", d_k, kMaxDk);
  STRATA_CHECK(n_k_heads >= 1 && n_v_heads % n_k_heads == 0,
               "GPU delta rule: {} value heads are not a multiple of {} key heads", n_v_heads,
               n_k_heads);
  if (n_runs == 0) return;
  check_groups(n_runs, "runs", "delta rule");
  check_groups(n_v_heads, "value heads", "delta rule");
  struct {
    uint64_t q, k, v, beta, g, out, runs;
    uint32_t qk_stride, v_stride, gate_stride, out_stride;
    uint32_t n_k_heads, n_v_heads, d_k, d_v, k_head_modulo, pad = 0;
  } p{q,
      k,
      v,
      beta,
      g,
      out,
      runs,
      u32(qk_stride),
      u32(v_stride),
      u32(gate_stride),
      u32(out_stride),
      u32(n_k_heads),
      u32(n_v_heads),
      u32(d_k),
      u32(d_v),
      k_head_modulo ? 1u : 0u};
  cmd.dispatch(device.kernel("gdn_delta_rule"), p, u32((d_v + kDeltaRows - 1) / kDeltaRows),
               u32(n_v_heads), u32(n_runs));
}

void GpuGdnOps::gated_norm(uint64_t x, int64_t x_stride, uint64_t weight, uint64_t z,
                           int64_t z_stride, int64_t n_tok, int64_t n_heads, int64_t d_v,
                           float eps) {
  if (n_tok == 0) return;
  struct {
    uint64_t x, weight, z;
    uint32_t n_tok, n_heads, d_v, x_stride, z_stride;
    uint32_t eps;  // the float's bits
  } p{x,
      weight,
      z,
      u32(n_tok),
      u32(n_heads),
      u32(d_v),
      u32(x_stride),
      u32(z_stride),
      std::bit_cast<uint32_t>(eps)};
  uint32_t gx, gy;
  grid(n_tok * n_heads, gx, gy);
  cmd.dispatch(device.kernel("gdn_gated_norm"), p, gx, gy);
}

}  // namespace strata::vk
