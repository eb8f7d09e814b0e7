#pragma once
// Drafts from a second, smaller model with the same vocabulary (`--draft-model`): it reads the
// whole context with its own KV cache and guesses the next tokens greedily, one decode step of
// the small model each. Between calls it keeps what it read: the next call rewinds its cache to
// where the context and what it holds part (its own guesses that were not kept, a new turn) and
// reads on from there, so a step costs the small model a few tokens, not the context.
//
// Draft models with recurrent layers cannot rewind a token at a time and are refused (the
// constructor throws); the target model may be any.

#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "runtime/session.h"
#include "runtime/speculative/drafter.h"
#include "util/thread_pool.h"

namespace strata {

// Why `draft` cannot draft for `target` (another vocabulary: a different size, or token texts that
// differ where both files list them), or "" when it can.
std::string draft_vocabulary_mismatch(const Model& target, const Model& draft);

class DraftModelDrafter : public Drafter {
 public:
  // n_ctx: the positions a generation may reach (the draft model's cache holds as many).
  DraftModelDrafter(Model& draft, int64_t n_ctx, ThreadPool& pool);
  std::vector<int32_t> propose(std::span<const int32_t> context, int64_t max_tokens) override;

  // Tokens the draft model has read in all (context and its own guesses), for tests.
  int64_t tokens_read() const { return tokens_read_; }

 private:
  Session session_;
  std::vector<int32_t> held_;  // what the session's cache holds, position by position
  std::vector<float> logits_;
  int64_t tokens_read_ = 0;
};

}  // namespace strata
