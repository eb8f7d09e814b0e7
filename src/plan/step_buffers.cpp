#include "plan/step_buffers.h"

#include <algorithm>

namespace strata::plan {
namespace {

// The executor's limits that size its buffers (backend/vulkan/gpu_ops.h).
constexpr int64_t kDecodeTokens = 8;               // steps up to this many use flash-decoding
constexpr int64_t kAttentionBlockPositions = 512;  // positions per flash-decoding block
// Activation buffers rounded for quantized products: one per partner type (Q8_0, Q8_K) per
// input (normed states, FFN hidden states, shared expert input, attention output, output head,
// recurrent output), each as wide as f32 rows.
constexpr int64_t kRoundedInputs = 6 * 2;

// Rows of a layer's matrices of one role: elements / n_embd / matrices (gate, up, down).
int64_t ffn_width(const ModelInventory& inv, TensorRole role) {
  int64_t widest = 0;
  for (int layer = 0; layer < inv.n_layer; ++layer) {
    int64_t elements = 0;
    int matrices = 0;
    for (const InventoryTensor& t : inv.tensors) {
      if (t.layer != layer || t.role != role || !t.matrix) continue;
      elements += t.elements;
      ++matrices;
    }
    if (matrices > 0 && inv.n_embd > 0) widest = std::max(widest, elements / matrices / inv.n_embd);
  }
  return widest;
}

}  // namespace

uint64_t gpu_step_buffer_bytes(const ModelInventory& inv, const StepShape& shape) {
  const int64_t cap = 2 * std::max<int64_t>(shape.tokens, 1);
  const int64_t rows = 2 * std::max<int64_t>(std::min(shape.logit_rows, shape.tokens), 1);
  const int64_t embd = inv.n_embd, k = std::max(inv.n_expert_used, 1);
  const int64_t q_dim = static_cast<int64_t>(inv.n_head) * inv.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(inv.n_head_kv) * inv.head_dim;
  const int64_t ff =
      std::max({ffn_width(inv, TensorRole::dense_ffn), static_cast<int64_t>(inv.n_ff_exp) * k,
                ffn_width(inv, TensorRole::shared_experts)});
  int64_t floats = 3 * cap * embd;           // hidden states, normed states, layer output
  floats += cap * (3 * q_dim + 2 * kv_dim);  // queries, gates, attention output, keys, values
  floats += 2 * cap * ff + cap * k * embd;   // FFN hidden states, expert outputs
  floats += cap * std::max(embd, ff) + cap;  // shared expert output and gate
  floats += cap * (std::max(inv.n_expert, 1) + 3 * k) + inv.n_layer * cap * k;  // routing
  floats += 1 + 3 * (cap * k + inv.n_expert + 1);                               // expert tiles
  floats += kRoundedInputs * cap * std::max(embd, ff);
  if (inv.recurrent_v_dim > 0) {
    const int64_t conv_dim = 2 * inv.recurrent_k_dim + inv.recurrent_v_dim;
    const int64_t v_heads = inv.recurrent_d_k > 0 ? inv.recurrent_v_dim / inv.recurrent_d_k : 1;
    floats += cap * (2 * conv_dim + 2 * inv.recurrent_v_dim + 4 * v_heads);
  }
  const int64_t blocks = (std::max<int64_t>(shape.context, 1) + kAttentionBlockPositions - 1) /
                         kAttentionBlockPositions;
  floats += 2 * kDecodeTokens * inv.n_head * blocks * (inv.head_dim + 2);
  floats += rows * (embd + inv.n_vocab);  // the output head's input and logits
  return static_cast<uint64_t>(floats) * 4;
}

MemoryConstants executor_memory(const ModelInventory& inv, const StepShape& shape,
                                uint64_t smallest_gpu_bytes) {
  MemoryConstants memory;
  if (smallest_gpu_bytes > 0) {
    memory.gpu_runtime_margin_bytes =
        std::min(memory.gpu_runtime_margin_bytes, smallest_gpu_bytes / 16);
  }
  memory.gpu_work_bytes = gpu_step_buffer_bytes(inv, shape);
  return memory;
}

}  // namespace strata::plan
