#pragma once
// Drafts for speculative decoding: a Drafter guesses the tokens that follow a generation so far,
// and the scheduler checks the guess in one forward step (one weight read for several tokens).
// The guess never changes what is generated: the scheduler samples every position from the
// model and keeps a drafted token only when it equals the one drawn.

#include <cstdint>
#include <span>
#include <vector>

namespace strata {

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Up to max_tokens tokens likely to follow `context` (the prompt and every token generated so
  // far, the last one not yet run through the model). Fewer, or none, is fine. Called on the
  // scheduler thread.
  virtual std::vector<int32_t> propose(std::span<const int32_t> context, int64_t max_tokens) = 0;

  // How strongly the last proposal is backed, for the cost model to judge it by: prompt lookup
  // gives the length of the match it copies after; 0 where the drafter has no such measure.
  virtual int64_t last_evidence() const { return 0; }
  // Whether a proposal costs next to nothing at any length (prompt lookup, unlike a head or a
  // model that runs a row per guess): the cost model then asks for the most and cuts the
  // proposal once it sees its evidence.
  virtual bool guesses_for_free() const { return false; }

  // A drafter that guesses from the model's hidden states (a NextN head) says so; the scheduler
  // then tells it, after every step, what each position it kept ran with: positions [position,
  // position + tokens.size()) took these tokens and left these hidden states ([n][n_embd], as the
  // output matrix reads them). Rolled-back positions are not told; a later call may restate a
  // position.
  virtual bool wants_hidden() const { return false; }
  virtual void observe(int64_t position, std::span<const int32_t> tokens, const float* hidden) {
    (void)position, (void)tokens, (void)hidden;
  }
};

// Proposes a fixed continuation of a prompt of prompt_tokens tokens: after g generated tokens,
// continuation[g], continuation[g + 1], ... (nothing past its end). With the model's own output
// every draft is right; with other tokens, wrong or partly right: what the scheduler's
// verification is tested with.
class ScriptedDrafter : public Drafter {
 public:
  ScriptedDrafter(size_t prompt_tokens, std::vector<int32_t> continuation)
      : prompt_tokens_(prompt_tokens), continuation_(std::move(continuation)) {}
  std::vector<int32_t> propose(std::span<const int32_t> context, int64_t max_tokens) override;
  int64_t calls() const { return calls_; }

 private:
  size_t prompt_tokens_;
  std::vector<int32_t> continuation_;
  int64_t calls_ = 0;
};

}  // namespace strata
