#pragma once
// Speculation only where it pays: wraps a drafter and decides each step how many of its tokens
// to check, from what this generation's drafts have earned so far and what checking costs here
// (VerifyCostCurve). With a per-token acceptance a, a step checking k drafted tokens yields
// E(k) = 1 + a + ... + a^k tokens for c(k + 1) one-token steps of time; the length with the best
// E(k) / c(k + 1) is checked, and none when no length beats a plain step (k = 0: 1 / 1).
//
// a is learned from the generation itself: after each step the context shows how many drafted
// tokens were kept (the common prefix of the draft and the tokens that followed), and a draft
// that was cut short counts one rejection: a = (kept + 1) / (kept + rejections + 2), Laplace's
// rule, so a fresh generation starts at 1/2 and a few misses turn drafting off. Once off, the
// inner drafter is not even asked (an MTP block's guesses cost a forward row each), but one step
// in kProbeEvery asks it for a single token to check, so a generation that turns to copying (an
// answer, then the edited file) turns drafting back on. On text with nothing to copy the inner
// drafter proposes nothing and this costs nothing at all.

#include <memory>

#include "runtime/speculative/drafter.h"
#include "runtime/speculative/verify_cost.h"

namespace strata {

class CostAwareDrafter : public Drafter {
 public:
  static constexpr int kProbeEvery = 16;
  // cost: the scheduler's curve (outlives the generation; read on the scheduler thread).
  CostAwareDrafter(std::unique_ptr<Drafter> inner, const VerifyCostCurve* cost);
  std::vector<int32_t> propose(std::span<const int32_t> context, int64_t max_tokens) override;
  bool wants_hidden() const override { return inner_->wants_hidden(); }
  void observe(int64_t position, std::span<const int32_t> tokens, const float* hidden) override {
    inner_->observe(position, tokens, hidden);
  }

  double acceptance() const;
  int64_t kept() const { return kept_; }
  int64_t rejections() const { return rejections_; }
  // The length to check of a proposal of n tokens (what propose truncates to).
  int64_t best_length(int64_t n) const;

 private:
  void learn(std::span<const int32_t> context);

  std::unique_ptr<Drafter> inner_;
  const VerifyCostCurve* cost_;
  std::vector<int32_t> last_draft_;  // checked in the step after the last call
  size_t last_context_ = 0;          // the context's length at that call
  int64_t kept_ = 0, rejections_ = 0;
  int64_t declined_ = 0;  // steps drafting was off (every kProbeEvery-th probes one token)
};

}  // namespace strata
