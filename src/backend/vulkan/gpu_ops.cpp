#include "backend/vulkan/gpu_ops.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <string>

#include "quant/quant.h"
#include "util/error.h"

namespace strata::vk {
namespace {

constexpr uint32_t kMaxGroupsX = 65535;  // the minimum maxComputeWorkGroupCount[0]

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string typed(const char* kernel, GgmlType type) {
  return fmt::format("{}_{}", kernel, lower(ggml_type_name(type)));
}

// Workgroups for `count` items as an (x, y) grid within the per-dimension limit.
void grid(int64_t count, uint32_t& gx, uint32_t& gy) {
  gx = static_cast<uint32_t>(std::min<int64_t>(count, kMaxGroupsX));
  gy = static_cast<uint32_t>((count + gx - 1) / std::max<uint32_t>(gx, 1));
}

uint32_t u32(int64_t v) {
  return static_cast<uint32_t>(v);
}

// matmul.comp's grid: a row of fewer than 64 groups of 32 gets the smallest power of two >= its
// groups of the 64 threads, and the rest of the workgroup takes the next rows.
void matmul_grid(const GpuMatrix& w, uint32_t& gx, uint32_t& gy) {
  int64_t leaves = 64;
  while (leaves > 1 && leaves / 2 >= w.cols / 32) leaves /= 2;
  const int64_t rows_per_workgroup = 64 / leaves;
  grid((w.rows + rows_per_workgroup - 1) / rows_per_workgroup, gx, gy);
}

struct MatmulPush {
  uint64_t w, w2, x, y, ids, expert_stride, slots;
  uint32_t rows, cols, n_tok, x_stride, y_stride, x_div;
};

struct TiledPush {
  uint64_t w, w2, x, y, tiles, order, expert_stride;
  uint32_t rows, cols, n_tok, x_stride, y_stride, x_div;
};
constexpr int64_t kTileRows = 32, kTileTokens = 64;  // matmul_tiled.comp's BM and BN

// matmul_tiled: a grid of row tiles x (token tiles, or expert tiles in grouped mode).
void dispatch_tiled(GpuOps& ops, const GpuMatrix& w, const GpuMatrix* up, const TiledPush& p,
                    int64_t z_tiles) {
  const uint32_t shared_bytes = (up ? 2 * 32 : 32) * 33 * 4 + 64 * 33 * 4 + 512;
  STRATA_CHECK(ops.device.info().max_shared_memory >= shared_bytes,
               "{}: the tiled product needs {} bytes of shared memory, the device has {}",
               ops.device.label(), shared_bytes, ops.device.info().max_shared_memory);
  uint32_t gx, gy;
  grid((w.rows + kTileRows - 1) / kTileRows, gx, gy);
  ops.cmd.dispatch(ops.device.kernel(typed(up ? "matmul_tiled_swiglu" : "matmul_tiled", w.type)), p,
                   gx, gy, u32(z_tiles));
}

struct ElementPush {
  uint64_t x, y;
  uint32_t n, cols = 0;
};

}  // namespace

bool gpu_supports(GgmlType type) {
  return Device::has_kernel(typed("matmul", type));
}

void check_gpu_matrix(const GpuMatrix& w, const char* what) {
  STRATA_CHECK(gpu_supports(w.type), "{}: the GPU has no kernel for weight type {}", what,
               ggml_type_name(w.type));
  STRATA_CHECK(w.cols % 32 == 0, "{}: rows of {} values; the GPU kernels need a multiple of 32",
               what, w.cols);
}

int64_t kv_row_bytes(GgmlType kv_type, int64_t head_dim) {
  return kv_type == GgmlType::Q8_0 ? head_dim / 32 * 34 : head_dim * 2;
}

void GpuOps::matmul(const GpuMatrix& w, uint64_t x, int64_t x_stride, uint64_t y, int64_t y_stride,
                    int64_t n_tok) {
  if (n_tok > kMaxDecodeTokens) {
    const TiledPush p{
        w.address,     0, x, y, 0, 0, 0, u32(w.rows), u32(w.cols), u32(n_tok), u32(x_stride),
        u32(y_stride), 1};
    dispatch_tiled(*this, w, nullptr, p, (n_tok + kTileTokens - 1) / kTileTokens);
    return;
  }
  MatmulPush p{w.address,     0, x, y, 0, 0, 0, u32(w.rows), u32(w.cols), u32(n_tok), u32(x_stride),
               u32(y_stride), 1};
  uint32_t gx, gy;
  matmul_grid(w, gx, gy);
  cmd.dispatch(device.kernel(typed("matmul", w.type)), p, gx, gy,
               u32((n_tok + kMaxDecodeTokens - 1) / kMaxDecodeTokens));
}

void GpuOps::matmul_swiglu(const GpuMatrix& gate, const GpuMatrix& up, uint64_t x, int64_t x_stride,
                           uint64_t y, int64_t y_stride, int64_t n_tok) {
  if (gate.type != up.type) {  // no fused kernel for mixed types: two products, then SwiGLU
    fail("matmul_swiglu: gate ({}) and up ({}) differ in type; use matmul + swiglu",
         ggml_type_name(gate.type), ggml_type_name(up.type));
  }
  if (n_tok > kMaxDecodeTokens) {
    const TiledPush p{
        gate.address,  up.address,    x, y, 0, 0, 0, u32(gate.rows), u32(gate.cols), u32(n_tok),
        u32(x_stride), u32(y_stride), 1};
    dispatch_tiled(*this, gate, &up, p, (n_tok + kTileTokens - 1) / kTileTokens);
    return;
  }
  MatmulPush p{
      gate.address,  up.address,    x, y, 0, 0, 0, u32(gate.rows), u32(gate.cols), u32(n_tok),
      u32(x_stride), u32(y_stride), 1};
  uint32_t gx, gy;
  matmul_grid(gate, gx, gy);
  cmd.dispatch(device.kernel(typed("matmul_swiglu", gate.type)), p, gx, gy,
               u32((n_tok + kMaxDecodeTokens - 1) / kMaxDecodeTokens));
}

void GpuOps::matmul_experts(const GpuMatrix& w, const GpuMatrix* up, uint64_t ids, uint64_t x,
                            int64_t x_stride, int64_t x_div, uint64_t y, int64_t y_stride,
                            int64_t n_pairs, uint64_t slots) {
  STRATA_CHECK(!up || up->type == w.type, "matmul_experts: gate and up differ in type");
  MatmulPush p{w.address,
               up ? up->address : 0,
               x,
               y,
               ids,
               static_cast<uint64_t>(w.rows * w.row_bytes),
               slots,
               u32(w.rows),
               u32(w.cols),
               u32(n_pairs),
               u32(x_stride),
               u32(y_stride),
               u32(x_div)};
  uint32_t gx, gy;
  matmul_grid(w, gx, gy);
  cmd.dispatch(device.kernel(typed(up ? "matmul_swiglu" : "matmul", w.type)), p, gx, gy,
               u32(n_pairs));
}

int64_t moe_tiles_capacity(int64_t n_pairs, int64_t n_expert) {
  return (n_pairs + kTileTokens - 1) / kTileTokens + std::min(n_pairs, n_expert);
}

void GpuOps::moe_group(uint64_t ids, int64_t n_pairs, int64_t n_expert, uint64_t order,
                       uint64_t tiles, uint64_t slots, int64_t n_slots) {
  const int64_t buckets = slots ? n_slots + 1 : n_expert;
  STRATA_CHECK(buckets <= kMaxGroupedExperts, "moe_group: {} experts, at most {}", buckets,
               kMaxGroupedExperts);
  struct {
    uint64_t ids, order, tiles, slots;
    uint32_t n_pairs, n_expert;
  } p{ids, order, tiles, slots, u32(n_pairs), u32(buckets)};
  cmd.dispatch(device.kernel("moe_group"), p, 1);
}

void GpuOps::matmul_expert_tiles(const GpuMatrix& w, const GpuMatrix* up, uint64_t tiles,
                                 uint64_t order, int64_t max_tiles, uint64_t x, int64_t x_stride,
                                 int64_t x_div, uint64_t y, int64_t y_stride) {
  STRATA_CHECK(!up || up->type == w.type, "matmul_expert_tiles: gate and up differ in type");
  const TiledPush p{w.address,
                    up ? up->address : 0,
                    x,
                    y,
                    tiles,
                    order,
                    static_cast<uint64_t>(w.rows * w.row_bytes),
                    u32(w.rows),
                    u32(w.cols),
                    0,
                    u32(x_stride),
                    u32(y_stride),
                    u32(x_div)};
  dispatch_tiled(*this, w, up, p, max_tiles);
}

void GpuOps::get_rows(const GpuMatrix& w, uint64_t ids, int64_t n, uint64_t out) {
  struct {
    uint64_t w, ids, out;
    uint32_t cols, n_rows_w;
  } p{w.address, ids, out, u32(w.cols), u32(w.rows)};
  cmd.dispatch(device.kernel(typed("get_rows", w.type)), p, u32(n));
}

void GpuOps::rms_norm(uint64_t x, int64_t x_stride, uint64_t weight, uint64_t out,
                      int64_t out_stride, int64_t rows, int64_t cols, float eps) {
  struct {
    uint64_t x, weight, out;
    uint32_t rows, cols, x_stride, out_stride;
    uint32_t eps, pad = 0;  // eps: the float's bits
  } p{x,
      weight,
      out,
      u32(rows),
      u32(cols),
      u32(x_stride),
      u32(out_stride),
      std::bit_cast<uint32_t>(eps)};
  uint32_t gx, gy;
  grid(rows, gx, gy);
  cmd.dispatch(device.kernel("rms_norm"), p, gx, gy);
}

void GpuOps::rope(uint64_t x, int64_t token_stride, uint64_t positions, uint64_t inv_freq,
                  int64_t n_tok, int64_t n_heads, int64_t head_dim, int64_t n_rot, bool neox) {
  struct {
    uint64_t x, positions, inv_freq;
    uint32_t n_tok, n_heads, head_dim, n_rot, neox, token_stride;
  } p{x,          positions,      inv_freq,         u32(n_tok), u32(n_heads), u32(head_dim),
      u32(n_rot), neox ? 1u : 0u, u32(token_stride)};
  uint32_t gx, gy;
  grid((n_tok * n_heads * (n_rot / 2) + 63) / 64, gx, gy);
  cmd.dispatch(device.kernel("rope"), p, gx, gy);
}

void GpuOps::kv_store(GgmlType kv_type, uint64_t k, uint64_t v, uint64_t k_cache, uint64_t v_cache,
                      uint64_t slots, int64_t n_tok, int64_t n_kv_heads, int64_t head_dim) {
  struct {
    uint64_t k, v, k_cache, v_cache, slots;
    uint32_t n_tok, n_kv_heads, head_dim, row_bytes;
  } p{k,
      v,
      k_cache,
      v_cache,
      slots,
      u32(n_tok),
      u32(n_kv_heads),
      u32(head_dim),
      u32(kv_row_bytes(kv_type, head_dim))};
  const int64_t items = n_tok * n_kv_heads * (head_dim / 32);
  cmd.dispatch(device.kernel(typed("kv_store", kv_type)), p, u32((items + 63) / 64));
}

int64_t attention_blocks(int64_t n_positions) {
  return (n_positions + kAttentionBlockPositions - 1) / kAttentionBlockPositions;
}

void GpuOps::attention(GgmlType kv_type, uint64_t q, int64_t q_stride, uint64_t out,
                       int64_t out_stride, uint64_t k_cache, uint64_t v_cache, uint64_t tokens,
                       uint64_t pages, int64_t page_size, int64_t n_tok, int64_t n_heads,
                       int64_t n_kv_heads, int64_t head_dim, float scale, uint64_t partials,
                       int64_t splits, const AttentionExtras& extras) {
  STRATA_CHECK(head_dim <= 512 && head_dim % 32 == 0,
               "GPU attention: head size {} (needs a multiple of 32, at most 512)", head_dim);
  STRATA_CHECK(splits == 0 || partials != 0, "GPU attention: split without a partials buffer");
  struct {
    uint64_t q, out, k_cache, v_cache, tokens, pages, partials, sinks;
    uint32_t n_heads, n_kv_heads, head_dim, q_stride, out_stride, row_bytes, page_size, splits;
    uint32_t scale, window;  // scale: the float's bits
  } p{q,
      out,
      k_cache,
      v_cache,
      tokens,
      pages,
      partials,
      extras.sinks,
      u32(n_heads),
      u32(n_kv_heads),
      u32(head_dim),
      u32(q_stride),
      u32(out_stride),
      u32(kv_row_bytes(kv_type, head_dim)),
      u32(page_size),
      u32(splits),
      std::bit_cast<uint32_t>(scale),
      u32(extras.window)};
  cmd.dispatch(device.kernel(typed("attention", kv_type)), p, u32(n_heads), u32(n_tok),
               u32(std::max<int64_t>(splits, 1)));
  if (splits == 0) return;
  struct {
    uint64_t out, tokens, partials, sinks;
    uint32_t n_heads, head_dim, out_stride, splits, window, pad = 0;
  } c{out,           tokens,          partials,    extras.sinks,      u32(n_heads),
      u32(head_dim), u32(out_stride), u32(splits), u32(extras.window)};
  cmd.dispatch(device.kernel("attention_combine"), c, u32(n_heads), u32(n_tok));
}

bool GpuOps::round_activations(GgmlType weight_type, uint64_t x, int64_t x_stride, uint64_t out,
                               int64_t out_stride, int64_t rows, int64_t cols) {
  const GgmlType partner = quant::traits(weight_type).activation_type;
  const char* kernel = nullptr;
  int64_t block = 32;
  switch (partner) {
    case GgmlType::F32:
      return false;
    case GgmlType::F16:
      kernel = "quantize_act_f16";
      break;
    case GgmlType::BF16:
      kernel = "quantize_act_bf16";
      break;
    case GgmlType::Q8_0:
    case GgmlType::Q8_1:
      kernel = "quantize_act_q8_0";
      break;  // the same codes and scale
    case GgmlType::Q8_K:
      kernel = "quantize_act_q8_k";
      block = 256;
      break;
    default:
      fail("no GPU activation rounding for {} (partner of {})", ggml_type_name(partner),
           ggml_type_name(weight_type));
  }
  STRATA_CHECK(cols % block == 0, "activations of {} values for {} weights (blocks of {})", cols,
               ggml_type_name(weight_type), block);
  struct {
    uint64_t x, out;
    uint32_t rows, cols, x_stride, out_stride;
  } p{x, out, u32(rows), u32(cols), u32(x_stride), u32(out_stride)};
  uint32_t gx, gy;
  grid((rows * (cols / block) + 63) / 64, gx, gy);
  cmd.dispatch(device.kernel(kernel), p, gx, gy);
  return true;
}

void GpuOps::add(uint64_t x, uint64_t y, int64_t n) {
  uint32_t gx, gy;
  grid((n + 63) / 64, gx, gy);
  cmd.dispatch(device.kernel("elementwise_add"), ElementPush{x, y, u32(n)}, gx, gy);
}

void GpuOps::add_bias(uint64_t x, uint64_t bias, int64_t rows, int64_t cols) {
  if (!bias) return;
  uint32_t gx, gy;
  grid((rows * cols + 63) / 64, gx, gy);
  cmd.dispatch(device.kernel("elementwise_add_bias"),
               ElementPush{x, bias, u32(rows * cols), u32(cols)}, gx, gy);
}

void GpuOps::expert_bias(uint64_t x, uint64_t bias, uint64_t ids, uint64_t slots, int64_t pairs,
                         int64_t cols) {
  if (!bias) return;
  struct {
    uint64_t x, bias, ids, slots;
    uint32_t pairs, cols;
  } p{x, bias, ids, slots, u32(pairs), u32(cols)};
  uint32_t gx, gy;
  grid((pairs * cols + 63) / 64, gx, gy);
  cmd.dispatch(device.kernel("expert_bias"), p, gx, gy);
}

void GpuOps::swiglu(uint64_t gate, uint64_t up, int64_t n) {
  uint32_t gx, gy;
  grid((n + 63) / 64, gx, gy);
  cmd.dispatch(device.kernel("elementwise_swiglu"), ElementPush{gate, up, u32(n)}, gx, gy);
}

void GpuOps::swiglu_oai(uint64_t gate, uint64_t up, int64_t n) {
  uint32_t gx, gy;
  grid((n + 63) / 64, gx, gy);
  cmd.dispatch(device.kernel("elementwise_swiglu_oai"), ElementPush{gate, up, u32(n)}, gx, gy);
}

void GpuOps::sigmoid_mul(uint64_t x, uint64_t gate, int64_t n) {
  uint32_t gx, gy;
  grid((n + 63) / 64, gx, gy);
  cmd.dispatch(device.kernel("elementwise_sigmoid_mul"), ElementPush{x, gate, u32(n)}, gx, gy);
}

void GpuOps::moe_route(uint64_t logits, uint64_t ids, uint64_t weights, int64_t n_tok,
                       int64_t n_expert, int64_t k, const MoeRouting& routing) {
  struct {
    uint64_t logits, ids, weights, selection_bias;
    uint32_t n_tok, n_expert, k, renormalize, sigmoid_gating;
    uint32_t scale;  // the float's bits
  } p{logits,
      ids,
      weights,
      routing.selection_bias,
      u32(n_tok),
      u32(n_expert),
      u32(k),
      routing.renormalize ? 1u : 0u,
      routing.sigmoid_gating ? 1u : 0u,
      std::bit_cast<uint32_t>(routing.scale)};
  cmd.dispatch(device.kernel("moe_route"), p, u32((n_tok + 63) / 64));
}

void GpuOps::moe_combine(uint64_t down, uint64_t weights, uint64_t out, uint64_t shared,
                         uint64_t shared_logit, int64_t n_tok, int64_t n_embd, int64_t k) {
  struct {
    uint64_t down, weights, out, shared, shared_logit;
    uint32_t n_tok, n_embd, k, pad = 0;
  } p{down, weights, out, shared, shared_logit, u32(n_tok), u32(n_embd), u32(k)};
  uint32_t gx, gy;
  grid((n_tok * n_embd + 63) / 64, gx, gy);
  cmd.dispatch(device.kernel("moe_combine"), p, gx, gy);
}

}  // namespace strata::vk
