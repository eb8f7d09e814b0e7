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

class Session {
 public:
  Session(Model& model, int64_t n_ctx, GgmlType kv_type, ThreadPool& pool);

  // Appends tokens to the sequence. logits receives [n_vocab] for the last token, or
  // [tokens][n_vocab] when all_logits. Throws when the context would overflow.
  void eval(std::span<const int32_t> tokens, bool all_logits, std::vector<float>& logits,
            int64_t max_batch = 512);

  int64_t position() const { return position_; }

  int64_t capacity() const { return kv_.capacity(); }
  void reset() { position_ = 0; }
  // Forgets every token from `position` on (their cache rows are overwritten by what follows).
  void truncate(int64_t position);
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
  ForwardStats stats_;
};

}  // namespace strata
