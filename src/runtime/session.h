#pragma once
// One sequence being evaluated: a model, its KV cache and the position reached. Long inputs are
// fed in batches of at most `max_batch` tokens (batched prefill), single tokens are decode steps.

#include <cstdint>
#include <span>
#include <vector>

#include "model/model.h"
#include "runtime/kv_cache.h"
#include "util/thread_pool.h"

namespace strata {

// A point of a sequence to come back to: its length and, for hybrid models, a copy of the
// recurrent state (conv + delta-rule state of every recurrent layer) at that length. Recurrent
// state cannot be rewound token by token, so going back means restoring a snapshot.
struct SessionSnapshot {
  int64_t position = 0;
  std::vector<float> recurrent;  // Model::recurrent_state_floats() floats (empty otherwise)
};

class Session {
 public:
  Session(Model& model, int64_t n_ctx, GgmlType kv_type, ThreadPool& pool);
  ~Session();  // (not copyable: the model may track its state buffer by address)
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Appends tokens to the sequence. logits receives [n_vocab] for the last token, or
  // [tokens][n_vocab] when all_logits. Throws when the context would overflow.
  void eval(std::span<const int32_t> tokens, bool all_logits, std::vector<float>& logits,
            int64_t max_batch = 512);

  int64_t position() const { return position_; }

  int64_t capacity() const { return kv_.capacity(); }
  // An empty sequence: position 0, recurrent state zeroed.
  void reset();
  // Forgets every token from `position` on (their cache rows are overwritten by what follows).
  // Models with recurrent state can only go back to 0 (or stay where they are): otherwise this
  // throws, and restore(snapshot) is the way back.
  void truncate(int64_t position);
  // The current position and recurrent state.
  SessionSnapshot snapshot() const;
  // Goes back to a snapshot taken earlier in this sequence's history (its position must not be
  // past the current one, and the tokens before it must not have been replaced since): the KV
  // cache is truncated to its position and the recurrent state copied back.
  void restore(const SessionSnapshot& snapshot);
  // The recurrent state (empty for models without recurrent layers).
  std::span<const float> recurrent_state() const;
  const KvCache& kv_cache() const { return kv_; }
  Model& model() { return model_; }
  ForwardStats& stats() { return stats_; }

 private:
  void eval_batches(std::span<const int32_t> tokens, bool all_logits, std::vector<float>& logits,
                    int64_t max_batch);

  Model& model_;
  KvCache kv_;
  ThreadPool& pool_;
  int64_t position_ = 0;
  // [Model::recurrent_state_floats()], zero = fresh sequence. Mutable: a model that keeps the
  // state on a GPU refreshes it before the const readers return it (Model::recurrent_state_read).
  mutable std::vector<float> recurrent_;
  ForwardStats stats_;
};

}  // namespace strata
