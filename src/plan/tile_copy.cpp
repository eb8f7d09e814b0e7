#include "plan/tile_copy.h"

#include <string_view>
#include <vector>

#include "ops/matmul.h"
#include "quant/quant.h"

namespace strata::plan {
namespace {

// A matrix a GEMV runs on (decode_prefetch's weight_matrix_bytes counts these).
bool is_weight_matrix(const InventoryTensor& t) {
  if (t.n_dims < 2 || t.row_length <= 0 || !quant::is_supported(t.type)) return false;
  const quant::TypeTraits& traits = quant::traits(t.type);
  return traits.kernels.vec_dot && t.row_length % traits.block_elems == 0;
}

// Rows of each matrix the loader makes of the tensor: one, except Qwen3-Next's fused projections,
// which become two (model/layer_weights.cpp): ssm_ba the beta and alpha halves, ssm_in the
// convolution's input (q, k, v) and the output gate (one row per value).
std::vector<int64_t> matrix_rows(const InventoryTensor& t, const ModelInventory& inv) {
  const int64_t rows = t.elements / t.row_length;
  const std::string_view name = t.name;
  if (name.ends_with(".ssm_ba.weight")) return {rows / 2, rows - rows / 2};
  if (name.ends_with(".ssm_in.weight") && inv.recurrent_v_dim > 0 && rows > inv.recurrent_v_dim)
    return {rows - inv.recurrent_v_dim, inv.recurrent_v_dim};
  return {rows};
}

// What ops::PackedTiles allocates for the tensor's matrices: whole tiles, rounded to 64 bytes.
uint64_t tile_bytes(const InventoryTensor& t, const ModelInventory& inv) {
  const quant::PackedTileKernels& k = quant::traits(t.type).kernels.packed;
  if (!k.pack) return 0;
  uint64_t bytes = 0;
  for (const int64_t rows : matrix_rows(t, inv)) {
    const int64_t tiles = (rows + k.rows - 1) / k.rows;
    bytes += static_cast<uint64_t>((tiles * k.bytes(t.row_length) + 63) / 64 * 64);
  }
  return bytes;
}

}  // namespace

uint64_t packed_tile_copy_bytes(const ModelInventory& inv) {
  int64_t matrix_bytes = 0;
  bool has_output = false;
  for (const InventoryTensor& t : inv.tensors) {
    if (is_weight_matrix(t)) matrix_bytes += static_cast<int64_t>(t.bytes);
    has_output |= t.role == TensorRole::output;
  }
  if (matrix_bytes >= ops::kStreamedWeightBytes) return 0;
  uint64_t bytes = 0;
  for (const InventoryTensor& t : inv.tensors) {
    // The layers' products (not a NextN/MTP block after them: the drafter's, unpacked) and the
    // output head, which is the embedding table where the file ties them.
    const bool in_layers = t.layer >= 0 && t.layer < inv.n_layer && t.matrix;
    const bool head =
        t.role == TensorRole::output || (!has_output && t.role == TensorRole::embeddings);
    if ((in_layers || head) && is_weight_matrix(t)) bytes += tile_bytes(t, inv);
  }
  return bytes;
}

}  // namespace strata::plan
