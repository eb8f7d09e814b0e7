#pragma once
// Drafts from the server's earlier answers (AnswerHistory): what followed the context's last
// tokens the latest time an answer held them. Prompt lookup's second source, for the tokens a
// prompt does not hold: how a model opens and closes an answer, its usual phrases. Judged like
// prompt lookup, by how far back the match reaches.

#include "runtime/speculative/answer_history.h"
#include "runtime/speculative/drafter.h"

namespace strata {

class HistoryDrafter : public Drafter {
 public:
  // The history outlives the drafter (the scheduler's, read on its thread).
  explicit HistoryDrafter(const AnswerHistory& history) : history_(history) {}
  std::vector<int32_t> propose(std::span<const int32_t> context, int64_t max_tokens) override;
  int64_t last_evidence() const override { return last_match_; }
  bool guesses_for_free() const override { return true; }

 private:
  const AnswerHistory& history_;
  int64_t last_match_ = 0;
};

}  // namespace strata
