#pragma once
// Recording of strata's GPU kernels: one function per op, taking device addresses and shapes.
// Each has a CPU counterpart in quant/ and ops/ that is its reference (tests/unit/vulkan).
// Activations are f32 rows; weights stay in their GGUF blocks.

#include <cstdint>

#include "backend/vulkan/device.h"
#include "gguf/ggml_type.h"

namespace strata::vk {

// A weight matrix on the device: `rows` rows of `cols` elements of `type`, row-major.
struct GpuMatrix {
  GgmlType type = GgmlType::F32;
  uint64_t address = 0;
  int64_t rows = 0, cols = 0, row_bytes = 0;
};

// Whether the GPU computes with this weight type (every type the CPU supports).
bool gpu_supports(GgmlType type);
// Throws naming the tensor and type when the GPU has no kernel for it or its rows are not a
// multiple of 32 values.
void check_gpu_matrix(const GpuMatrix& w, const char* what);

// gpt-oss's attention: one sink logit per query head ([n_heads] f32 on the device, 0: none) and
// a sliding window (each token sees its last `window` positions; 0: all).
struct AttentionExtras {
  uint64_t sinks = 0;
  int64_t window = 0;
};

// How moe_route turns router logits into expert weights (model/blocks.h MoeParams).
struct MoeRouting {
  bool renormalize = true;
  bool sigmoid_gating = false;  // GLM-4.5: rank sigmoid + selection_bias, weigh by sigmoid
  uint64_t selection_bias = 0;  // [n_expert] f32 on the device, or 0
  float scale = 1.0f;
};

struct GpuOps {
  Device& device;
  CommandList& cmd;

  // y[t * y_stride + r] = w.row(r) . x[t * x_stride ...] for t < n_tok. Up to 8 tokens: one
  // weight row per workgroup (decode); more: 64 x 64 tiles (prompts). Both sum each output in
  // their own fixed order, whatever the other rows of the batch.
  void matmul(const GpuMatrix& w, uint64_t x, int64_t x_stride, uint64_t y, int64_t y_stride,
              int64_t n_tok);
  // y = silu(gate x) * (up x), gate and up of one type.
  void matmul_swiglu(const GpuMatrix& gate, const GpuMatrix& up, uint64_t x, int64_t x_stride,
                     uint64_t y, int64_t y_stride, int64_t n_tok);
  // Expert form: pair p (< n_pairs) multiplies expert ids[p] of a stacked tensor (w describes
  // expert 0; expert e starts e * w.rows * w.row_bytes later) with activation row p / x_div,
  // writing y[p * y_stride ...]. up != nullptr: the fused silu(gate) * up form. slots != 0: a
  // device-side map (int32 per expert id) of the experts this stack holds (a layer's hot set):
  // expert e is at slot slots[e]; pairs of experts not held (slot -1) get zeros.
  void matmul_experts(const GpuMatrix& w, const GpuMatrix* up, uint64_t ids, uint64_t x,
                      int64_t x_stride, int64_t x_div, uint64_t y, int64_t y_stride,
                      int64_t n_pairs, uint64_t slots = 0);
  // Prompt batches of a MoE layer, tokens grouped by expert on the device: moe_group sorts the
  // n_pairs (token, expert) pairs of ids by expert into `order` ([n_pairs] uint) and cuts each
  // expert's run into tiles ([1 + 3 * moe_tiles_capacity] uint: a count, then {expert, start,
  // n}); matmul_expert_tiles then multiplies each tile with its expert's rows, as matmul_experts
  // does pair by pair (same x_div, y rows = pairs), but reading each weight group once per tile.
  // With a slot map (n_slots experts held, as matmul_experts' slots) tiles name slots, and the
  // pairs of experts not held get zeros (size tiles for n_slots + 1 experts).
  void moe_group(uint64_t ids, int64_t n_pairs, int64_t n_expert, uint64_t order, uint64_t tiles,
                 uint64_t slots = 0, int64_t n_slots = 0);
  void matmul_expert_tiles(const GpuMatrix& w, const GpuMatrix* up, uint64_t tiles, uint64_t order,
                           int64_t max_tiles, uint64_t x, int64_t x_stride, int64_t x_div,
                           uint64_t y, int64_t y_stride);
  // out[i] = dequantized row ids[i] of w.
  void get_rows(const GpuMatrix& w, uint64_t ids, int64_t n, uint64_t out);
  // rows of `cols` values: out = x / rms(x) * weight (weight 0: none).
  void rms_norm(uint64_t x, int64_t x_stride, uint64_t weight, uint64_t out, int64_t out_stride,
                int64_t rows, int64_t cols, float eps);
  // In place on x[t][n_heads][head_dim] (token stride token_stride floats), positions int32.
  void rope(uint64_t x, int64_t token_stride, uint64_t positions, uint64_t inv_freq, int64_t n_tok,
            int64_t n_heads, int64_t head_dim, int64_t n_rot, bool neox);
  // Stores k and v ([n_tok][n_kv_heads * head_dim]) at slots[t] of an F16 or Q8_0 cache.
  void kv_store(GgmlType kv_type, uint64_t k, uint64_t v, uint64_t k_cache, uint64_t v_cache,
                uint64_t slots, int64_t n_tok, int64_t n_kv_heads, int64_t head_dim);
  // out[t][h] = attention of q[t][h] over its sequence: tokens = {n_positions, page_offset} per
  // token; page_size 0 means slot = position (pages unused). splits > 0 (flash-decoding, for
  // few tokens over long caches): the blocks of kAttentionBlockPositions positions run in
  // workgroups of their own (at most `splits` per token: attention_blocks of the longest) and
  // are merged after, through partials ([n_tok][n_heads][splits][head_dim + 2] floats). Both
  // ways give the same bits.
  void attention(GgmlType kv_type, uint64_t q, int64_t q_stride, uint64_t out, int64_t out_stride,
                 uint64_t k_cache, uint64_t v_cache, uint64_t tokens, uint64_t pages,
                 int64_t page_size, int64_t n_tok, int64_t n_heads, int64_t n_kv_heads,
                 int64_t head_dim, float scale, uint64_t partials = 0, int64_t splits = 0,
                 const AttentionExtras& extras = {});
  // out = x rounded as the CPU quantizes activations for weights of `weight_type` (the partner
  // format: Q8_0, Q8_1, Q8_K, F16, BF16), kept as floats. Returns false, writing nothing, when
  // the partner is F32 (x is used as it is).
  bool round_activations(GgmlType weight_type, uint64_t x, int64_t x_stride, uint64_t out,
                         int64_t out_stride, int64_t rows, int64_t cols);
  void add(uint64_t x, uint64_t y, int64_t n);                           // x += y
  void add_bias(uint64_t x, uint64_t bias, int64_t rows, int64_t cols);  // x[r][c] += bias[c]
  // x[p][c] += bias[ids[p]][c] for `pairs` rows of cols, skipping the pairs whose expert has a
  // negative slot in `slots` ([n_expert] int32; 0: no slot map). No bias (0): nothing.
  void expert_bias(uint64_t x, uint64_t bias, uint64_t ids, uint64_t slots, int64_t pairs,
                   int64_t cols);
  void swiglu(uint64_t gate, uint64_t up, int64_t n);
  // gate = gpt-oss's clamped SwiGLU of gate and up (ops::swiglu_oai, alpha 1.702, limit 7)
  void swiglu_oai(uint64_t gate, uint64_t up, int64_t n);  // gate = silu(gate) * up
  void sigmoid_mul(uint64_t x, uint64_t gate, int64_t n);  // x *= sigmoid(gate)
  // Top-k of softmax(logits) per token: ids [n_tok][k] int32, weights [n_tok][k].
  void moe_route(uint64_t logits, uint64_t ids, uint64_t weights, int64_t n_tok, int64_t n_expert,
                 int64_t k, const MoeRouting& routing);
  // out[t] = sum_j weights[t][j] down[t*k+j] (+ sigmoid(shared_logit[t]) * shared[t]).
  void moe_combine(uint64_t down, uint64_t weights, uint64_t out, uint64_t shared,
                   uint64_t shared_logit, int64_t n_tok, int64_t n_embd, int64_t k);
};

// Tiles moe_group may write for n_pairs pairs over n_expert experts (its `tiles` buffer holds
// 1 + 3 x this many words).
int64_t moe_tiles_capacity(int64_t n_pairs, int64_t n_expert);
constexpr int64_t kMaxGroupedExperts = 512;  // moe_group.comp's shared-memory tables
// Batches of up to this many tokens run the one-row-per-workgroup (decode) kernels; larger ones
// the tiled and grouped-expert kernels (bit-identical results).
constexpr int64_t kMaxDecodeTokens = 8;

// Attention blocks (attention_merge.glsl's BLOCK_POSITIONS) of a token attending n positions.
constexpr int64_t kAttentionBlockPositions = 512;
int64_t attention_blocks(int64_t n_positions);

// Bytes of one cache vector of head_dim values (F16 or Q8_0).
int64_t kv_row_bytes(GgmlType kv_type, int64_t head_dim);

}  // namespace strata::vk
