#include "runtime/speculative/cost_aware_drafter.h"

#include <algorithm>
#include <stdexcept>

#include "util/draft_length.h"

namespace strata {

CostAwareDrafter::CostAwareDrafter(std::unique_ptr<Drafter> inner, const VerifyCostCurve* cost)
    : inner_(std::move(inner)), cost_(cost) {
  if (!inner_ || !cost_) throw std::invalid_argument("CostAwareDrafter needs a drafter and a cost");
}

double CostAwareDrafter::acceptance() const {
  return static_cast<double>(kept_ + 1) / static_cast<double>(kept_ + rejections_ + 2);
}

int64_t CostAwareDrafter::best_length(int64_t n) const {
  const int64_t most = std::min<int64_t>(n, VerifyCostCurve::kMaxTokens - 1);
  return best_draft_length(
             acceptance(), most,
             [this](int64_t tokens) { return cost_->relative(static_cast<int>(tokens)); })
      .tokens;
}

void CostAwareDrafter::learn(std::span<const int32_t> context) {
  if (last_draft_.empty()) return;
  if (context.size() <= last_context_) {  // not the same generation: start over
    last_draft_.clear();
    kept_ = rejections_ = 0;
    return;
  }
  // After the step: the kept draft tokens, then the token drawn after them.
  const auto followed = context.subspan(last_context_);
  size_t kept = 0;
  while (kept < last_draft_.size() && kept < followed.size() && followed[kept] == last_draft_[kept])
    ++kept;
  kept_ += static_cast<int64_t>(kept);
  if (kept < last_draft_.size() && followed.size() > kept) ++rejections_;
  last_draft_.clear();
}

std::vector<int32_t> CostAwareDrafter::propose(std::span<const int32_t> context,
                                               int64_t max_tokens) {
  learn(context);
  // Only as many as could pay: a drafter that computes its guesses (an MTP block) runs no rows
  // that would be cut off, and none at all while drafting is off, but for a one-token probe.
  int64_t want = best_length(max_tokens);
  if (want == 0) {
    if (++declined_ % kProbeEvery != 0) return {};
    want = 1;
  }
  std::vector<int32_t> draft = inner_->propose(context, std::min(want, max_tokens));
  if (want > 1) draft.resize(static_cast<size_t>(best_length(std::ssize(draft))));
  last_draft_ = draft;
  last_context_ = context.size();
  return draft;
}

}  // namespace strata
