#pragma once
// A ForwardBatch in one shape whatever form the caller used: every token with its sequence and
// position, and the rows that want logits. Building it checks the batch against the caches, so a
// bad batch from a scheduler is an error message, not a write outside a cache.

#include <cstdint>
#include <vector>

#include "model/model.h"

namespace strata {

struct BatchLayout {
  std::vector<int32_t> sequence;    // [n] index into the caches
  std::vector<int64_t> position;    // [n]
  std::vector<int32_t> logit_rows;  // rows whose logits are written, in output order

  // Fills the layout from `batch`; throws strata::Error when the batch does not fit `kv`
  // (n_layer views per sequence) or is inconsistent.
  void build(const ForwardBatch& batch, std::span<const SequenceKv> kv, int64_t n_layer);
};

}  // namespace strata
