#pragma once
// Drafts from the model's own multi-token-prediction block (NextnHead): the head reads the
// trunk's hidden state at the last position that ran and the token drawn there, and guesses the
// token after it; fed its own output and that guess, it guesses the next, and so on (greedy,
// argmax). It keeps a KV cache of its own, which must hold the head's state at every earlier
// position: the scheduler shows it every position the trunk kept (observe), and it runs the head
// over each as soon as the token after it is known (a prompt chunk at once, in one batch).
//
// Positions are the head's own, counted from the first one it was shown (a prompt resumed from
// the prefix cache shows only its new tokens): RoPE only sees distances, so the head attends as
// it would from position 0, over what it was shown. The chained guesses write cache positions
// past the last exact one; the trunk's next kept positions overwrite them.

#include <memory>
#include <vector>

#include "model/nextn_head.h"
#include "runtime/kv_cache.h"
#include "runtime/speculative/drafter.h"
#include "util/thread_pool.h"

namespace strata {

class NextnDrafter : public Drafter {
 public:
  // n_ctx: the positions a generation may reach (the head's cache holds as many).
  NextnDrafter(const NextnHead& head, int64_t n_ctx, ThreadPool& pool);

  bool wants_hidden() const override { return true; }
  void observe(int64_t position, std::span<const int32_t> tokens, const float* hidden) override;
  std::vector<int32_t> propose(std::span<const int32_t> context, int64_t max_tokens) override;

  // Rows the head has run, for tests and benchmarks: exact ones (trunk states) and guesses.
  int64_t rows_run() const { return rows_run_; }
  // The logits of the last proposal's last guess (for tests: argmax hides small errors).
  std::span<const float> last_logits() const { return logits_; }

 private:
  // Runs the head over rows at trunk positions [position, position + tokens.size()).
  void run(std::span<const int32_t> tokens, const float* hidden, int64_t position, float* logits);
  void reset(int64_t origin);

  const NextnHead& head_;
  ThreadPool& pool_;
  int64_t n_embd_;
  KvCache cache_;
  NextnWorkspace ws_;
  int64_t origin_ = -1;  // the trunk position the head counts as 0 (-1: shown nothing yet)
  // The trunk's state at position waiting_at_, whose next token is not known yet (-1: none).
  // Every position before it has run through the head with its true state and token.
  int64_t waiting_at_ = -1;
  // Positions [origin_, exact_end_) ran through the head with the trunk's states and the tokens
  // drawn after them; past it the cache holds guesses (or nothing).
  int64_t exact_end_ = 0;
  std::vector<float> waiting_;
  std::vector<float> out_, chained_, logits_;
  int64_t rows_run_ = 0;
};

}  // namespace strata
