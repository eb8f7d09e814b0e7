#pragma once
// What a plan places: every tensor of a model with its bytes, layer and role, routed-expert
// tensors (and their biases) cut into per-expert slices, and per-layer totals. Built from a GGUF
// file, or from a published architecture (no weights needed) with the bytes of a quantization.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/tensor_role.h"
#include "plan/architecture_presets.h"

namespace strata::plan {

// Bytes and elements of one weight type within a group of tensors (the calibrated CPU cost model
// prices each type at its own measured rate).
struct TypedWeights {
  GgmlType type = GgmlType::F32;
  uint64_t bytes = 0;
  int64_t elements = 0;  // of matrices only: multiply-accumulates per token
  // Routed-expert down projections: rows of the expert FFN size (768 / 512 values), a kernel
  // shape of its own (short rows cost more per value in a prompt batch).
  bool expert_down = false;
};

struct InventoryTensor {
  std::string name;
  TensorRole role = TensorRole::other;
  int layer = -1;  // -1: outside the repeated blocks
  uint64_t bytes = 0;
  int64_t elements = 0;
  GgmlType type = GgmlType::F32;
  bool matrix = false;              // 2-D or more: a matrix product (vectors are norms, biases)
  int n_dims = 1;                   // of the stored shape (a 2-D bias is not a matrix above)
  int64_t row_length = 0;           // values per row: the shape's first dimension
  int n_expert = 0;                 // routed experts: the experts this tensor holds, else 0
  uint64_t expert_slice_bytes = 0;  // routed experts: bytes / n_expert (one expert's slice)
};

struct LayerInventory {
  bool has_kv_cache = true;  // full attention; false: recurrent (linear attention) state instead
  // Sliding-window attention (gpt-oss): a token reads at most this many cached positions; 0: all.
  // The cache still stores every position (strata's KV cache is not a ring buffer).
  int64_t kv_window = 0;
  uint64_t attention_bytes = 0;  // attention or recurrent weights and norms: always read
  uint64_t router_bytes = 0;
  uint64_t shared_expert_bytes = 0;
  uint64_t dense_ffn_bytes = 0;
  uint64_t expert_bytes = 0;                // all routed experts of the layer
  uint64_t expert_slice_bytes = 0;          // one expert (all its tensors: gate, up, down)
  int64_t active_params = 0;                // parameters one token multiplies with (for FLOPs)
  uint64_t recurrent_state_bytes = 0;       // per sequence, read and written every token
  std::vector<TypedWeights> dense_by_type;  // dense_bytes() by weight type
  std::vector<TypedWeights> expert_slice_by_type;  // one expert's slice by weight type
  int dense_matrices = 0;                          // non-expert matrices (one product each)
  int expert_matrices = 0;                         // routed-expert tensors (gate, up, down)
  // Bytes read every token regardless of routing: everything but the routed experts.
  uint64_t dense_bytes() const {
    return attention_bytes + router_bytes + shared_expert_bytes + dense_ffn_bytes;
  }
  // Cached positions a token at `context` attends over.
  double attended_positions(double context) const;
  // (token, position) pairs of causal attention within a prompt of `tokens` tokens.
  double causal_pairs(double tokens) const;
};

struct ModelInventory {
  std::string name;
  std::string arch;
  std::string source;  // file path, or "architecture preset X at Y"
  int n_layer = 0;
  int n_embd = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int n_expert = 0;
  int n_expert_used = 0;
  int n_ff_exp = 0;  // rows of one expert's gate/up (0 without experts)
  // Gated DeltaNet layers (0 without): widths of the keys and values (heads x head dim) and the
  // key dimension of the state, so a token's delta rule touches v_dim x d_k state values.
  int recurrent_k_dim = 0;
  int recurrent_v_dim = 0;
  int recurrent_d_k = 0;
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  std::vector<InventoryTensor> tensors;
  std::vector<LayerInventory> layers;
  uint64_t embeddings_bytes = 0;  // token_embd: one row read per token
  uint64_t output_bytes = 0;      // LM head and output norm: read every token
  int64_t output_params = 0;
  std::vector<TypedWeights> output_by_type;  // LM head (and output norm) by weight type
  uint64_t other_bytes = 0;
  // [layer][expert] probability that a selected expert slot is this expert (sums to 1 per layer);
  // uniform unless a profile was loaded.
  std::vector<std::vector<double>> popularity;
  std::string popularity_source = "uniform";

  uint64_t total_bytes() const;
  uint64_t routed_expert_bytes() const;
  int kv_layers() const;
  // KV cache bytes per token of context over all KV layers (K and V), for a KV element size.
  uint64_t kv_bytes_per_token(double kv_bytes_per_element) const;
  // One layer's KV bytes per token.
  double layer_kv_bytes_per_token(double kv_bytes_per_element) const;
  int64_t active_params() const;
};

ModelInventory inventory_from_gguf(const GgufFile& file);

// How many bytes the weights take: bits per weight for every matrix, or the published file size
// (distributed over the matrices at a uniform bits per weight; norms stay f32). Experts of a
// fixed type (gpt-oss's MXFP4) keep that type's bytes; the rest takes the given bits or size.
struct WeightSize {
  double bits_per_weight = 0;
  uint64_t file_bytes = 0;
};
ModelInventory inventory_from_architecture(const ArchitectureSpec& spec, const WeightSize& size);

// Expert popularity from a profile: {"expert_counts": [[count per expert] per layer]} (or a bare
// array of arrays): how often each expert was selected. Rows must match the inventory's layers
// and experts.
// model_path: the file being planned, when it is one; a profile recorded on a file of another
// name is warned about (its popularity is another model's).
void load_expert_popularity(ModelInventory& inventory, const std::string& path,
                            const std::string& model_path = "");

}  // namespace strata::plan
