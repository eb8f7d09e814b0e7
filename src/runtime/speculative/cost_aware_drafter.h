#pragma once
// Speculation only where it pays: wraps a drafter and decides each step how many of its tokens
// to check, from what drafts like this one have earned and what checking costs here
// (VerifyCostCurve). With a per-token acceptance a, a step checking k drafted tokens yields
// E(k) = 1 + a + ... + a^k tokens for c(k + 1) one-token steps of time; the length with the best
// E(k) / c(k + 1) is checked, and none when no length beats a plain step (k = 0: 1 / 1).
//
// a is estimated per evidence bucket (AcceptanceTable: for prompt lookup, how long a match the
// draft copies after; one bucket for drafters without such a measure). After each step the
// context shows how many drafted tokens were kept (the common prefix of the draft and the tokens
// that followed), and a draft cut short counts one rejection. This generation's counts of the
// bucket are added to a prior from the server's table, worth kPriorDrafts drafts:
// a = (kept + prior kept) / (kept + rejections + prior kept + prior rejections). Without a
// table the prior is Laplace's (1 kept, 1 rejection), so a fresh generation starts at 1/2 and a
// few misses turn drafting off.
//
// A drafter whose guesses are free (prompt lookup) is asked for the most every step and its
// proposal cut by its bucket's estimate. One whose guesses cost a forward row each (an MTP
// block, a draft model) is asked only for what could pay, and not at all while drafting is off.
// Either way, while no length pays, one step in kProbeEvery checks a single token, so a
// generation that turns to copying (an answer, then the edited file) turns drafting back on. On
// text with nothing to copy prompt lookup proposes nothing and this costs nothing at all.

#include <array>
#include <memory>

#include "runtime/speculative/acceptance_table.h"
#include "runtime/speculative/drafter.h"
#include "runtime/speculative/verify_cost.h"

namespace strata {

class CostAwareDrafter : public Drafter {
 public:
  static constexpr int kProbeEvery = 16;
  static constexpr double kPriorDrafts = 4;
  // cost: the scheduler's curve (outlives the generation; read on the scheduler thread). shared:
  // the scheduler's table for this kind of drafter (null: none), read and written likewise.
  CostAwareDrafter(std::unique_ptr<Drafter> inner, const VerifyCostCurve* cost,
                   AcceptanceTable* shared = nullptr);
  std::vector<int32_t> propose(std::span<const int32_t> context, int64_t max_tokens) override;
  bool wants_hidden() const override { return inner_->wants_hidden(); }
  void observe(int64_t position, std::span<const int32_t> tokens, const float* hidden) override {
    inner_->observe(position, tokens, hidden);
  }

  // This generation's acceptance over every bucket (Laplace's rule, no prior).
  double acceptance() const;
  // The estimate drafts of `bucket` are checked by (this generation's counts and the prior).
  double acceptance(int bucket) const;
  int64_t kept() const;  // this generation's, over every bucket
  int64_t rejections() const;
  // The length to check of a proposal of n tokens in `bucket` (what propose truncates to).
  int64_t best_length(int64_t n, int bucket = 0) const;

 private:
  void learn(std::span<const int32_t> context);
  // A draft of `want` tokens, or a one-token probe every kProbeEvery steps that want none.
  int64_t or_probe(int64_t want);

  std::unique_ptr<Drafter> inner_;
  const VerifyCostCurve* cost_;
  AcceptanceTable* shared_;
  // This generation's counts per bucket (unfaded, so whole numbers).
  std::array<AcceptanceTable::Counts, AcceptanceTable::kBuckets> own_{};
  std::vector<int32_t> last_draft_;  // checked in the step after the last call
  int last_bucket_ = 0;
  size_t last_context_ = 0;  // the context's length at that call
  int64_t declined_ = 0;     // steps drafting was off (every kProbeEvery-th probes one token)
};

}  // namespace strata
