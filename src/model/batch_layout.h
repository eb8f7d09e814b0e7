#pragma once
// A ForwardBatch in one shape whatever form the caller used: every token with its sequence and
// position, and the rows that want logits. Building it checks the batch against the caches, so a
// bad batch from a scheduler is an error message, not a write outside a cache.

#include <cstdint>
#include <span>
#include <string>
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

// A batch's rows in sequence order (stable), so each sequence's tokens are one run of rows, as
// the recurrent layers need them. Row i of the ordered batch is row order[i] of the batch.
struct SequenceRuns {
  struct Run {
    int32_t sequence;
    int64_t begin, count;
  };
  std::vector<int32_t> order, tokens, sequence;
  std::vector<int64_t> position;
  std::vector<int32_t> logit_rows;  // the layout's logit rows, as rows of the ordered batch
  std::vector<Run> runs;

  // Orders `layout` (built from `batch`) and checks that every sequence has a state buffer and
  // that each run continues it (states[s][0] counts the tokens state s has consumed).
  // n_sequences: the batch's caches; arch names the model in errors.
  void build(const ForwardBatch& batch, const BatchLayout& layout, std::span<float* const> states,
             size_t n_sequences, const std::string& arch);
};

// A batch's rows in the order a decoder runs them: the batch's own order, or, for models with
// recurrent layers, sequence order (SequenceRuns: each sequence's tokens one run, its state
// checked). The views stay valid until the next build (and while the batch lives).
class BatchRows {
 public:
  // Builds the layout of `batch` over `kv` (n_layer views each); ordered: by sequence, with the
  // batch's recurrent states checked (arch names the model in errors).
  void build(const ForwardBatch& batch, std::span<const SequenceKv> kv, int64_t n_layer,
             bool ordered, const std::string& arch);
  std::span<const int32_t> tokens() const { return tokens_; }
  std::span<const int32_t> sequence() const;
  std::span<const int64_t> position() const;
  std::span<const int32_t> logit_rows() const;
  std::span<const SequenceRuns::Run> runs() const;  // ordered batches only
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  // The batch's row that row i of this order is.
  int64_t batch_row(int64_t i) const {
    return is_ordered_ ? ordered_.order[static_cast<size_t>(i)] : i;
  }
  // Advances each state's header (tokens consumed) by its sequence's tokens (ordered batches).
  void advance_states(std::span<float* const> states) const;

 private:
  BatchLayout layout_;
  SequenceRuns ordered_;
  bool is_ordered_ = false;
  std::span<const int32_t> tokens_;
};

}  // namespace strata
