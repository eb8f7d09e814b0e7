#include "runtime/speculative/cost_aware_drafter.h"

#include <algorithm>
#include <stdexcept>

#include "util/draft_length.h"

namespace strata {

CostAwareDrafter::CostAwareDrafter(std::unique_ptr<Drafter> inner, const VerifyCostCurve* cost,
                                   AcceptanceTable* shared)
    : inner_(std::move(inner)), cost_(cost), shared_(shared) {
  if (!inner_ || !cost_) throw std::invalid_argument("CostAwareDrafter needs a drafter and a cost");
}

int64_t CostAwareDrafter::kept() const {
  double sum = 0;
  for (const AcceptanceTable::Counts& c : own_) sum += c.kept;
  return static_cast<int64_t>(sum);
}

int64_t CostAwareDrafter::rejections() const {
  double sum = 0;
  for (const AcceptanceTable::Counts& c : own_) sum += c.rejections;
  return static_cast<int64_t>(sum);
}

double CostAwareDrafter::acceptance() const {
  return static_cast<double>(kept() + 1) / static_cast<double>(kept() + rejections() + 2);
}

double CostAwareDrafter::acceptance(int bucket) const {
  const AcceptanceTable::Counts& own = own_[static_cast<size_t>(bucket)];
  double prior_kept = 1, prior_rejections = 1;
  if (shared_) {
    // The server's estimate for the bucket (Laplace's rule on its counts, below 1), as many
    // kept tokens as go with kPriorDrafts rejections at that rate.
    const AcceptanceTable::Counts& all = shared_->counts(bucket);
    const double a = (all.kept + 1) / (all.kept + all.rejections + 2);
    prior_rejections = kPriorDrafts;
    prior_kept = kPriorDrafts * a / (1 - a);
  }
  return (own.kept + prior_kept) / (own.kept + own.rejections + prior_kept + prior_rejections);
}

int64_t CostAwareDrafter::best_length(int64_t n, int bucket) const {
  const int64_t most = std::min<int64_t>(n, VerifyCostCurve::kMaxTokens - 1);
  return best_draft_length(
             acceptance(bucket), most,
             [this](int64_t tokens) { return cost_->relative(static_cast<int>(tokens)); })
      .tokens;
}

void CostAwareDrafter::learn(std::span<const int32_t> context) {
  if (last_draft_.empty()) return;
  if (context.size() <= last_context_) {  // not the same generation: start over
    last_draft_.clear();
    own_ = {};
    return;
  }
  // After the step: the kept draft tokens, then the token drawn after them.
  const auto followed = context.subspan(last_context_);
  size_t kept = 0;
  while (kept < last_draft_.size() && kept < followed.size() && followed[kept] == last_draft_[kept])
    ++kept;
  const bool rejected = kept < last_draft_.size() && followed.size() > kept;
  AcceptanceTable::Counts& own = own_[static_cast<size_t>(last_bucket_)];
  own.kept += static_cast<double>(kept);
  own.rejections += rejected ? 1.0 : 0.0;
  if (shared_) shared_->record(last_bucket_, static_cast<int64_t>(kept), rejected);
  last_draft_.clear();
}

int64_t CostAwareDrafter::or_probe(int64_t want) {
  if (want > 0) return want;
  return ++declined_ % kProbeEvery == 0 ? 1 : 0;
}

std::vector<int32_t> CostAwareDrafter::propose(std::span<const int32_t> context,
                                               int64_t max_tokens) {
  learn(context);
  std::vector<int32_t> draft;
  int bucket = 0;
  if (inner_->guesses_for_free()) {
    // Asked for the most, then judged by the evidence behind this very proposal.
    draft = inner_->propose(context, max_tokens);
    if (draft.empty()) return {};
    bucket = AcceptanceTable::bucket_of(inner_->last_evidence());
    draft.resize(static_cast<size_t>(or_probe(best_length(std::ssize(draft), bucket))));
  } else {
    // Only as many as could pay: a drafter that computes its guesses (an MTP block) runs no
    // rows that would be cut off, and none at all while drafting is off, but for a probe.
    const int64_t want = or_probe(best_length(max_tokens));
    if (want == 0) return {};
    draft = inner_->propose(context, std::min(want, max_tokens));
    if (want > 1) draft.resize(static_cast<size_t>(best_length(std::ssize(draft))));
  }
  last_draft_ = draft;
  last_bucket_ = bucket;
  last_context_ = context.size();
  return draft;
}

}  // namespace strata
