#include "runtime/speculative/cost_aware_drafter.h"

#include <algorithm>
#include <stdexcept>

namespace strata {

CostAwareDrafter::CostAwareDrafter(std::unique_ptr<Drafter> inner, const VerifyCostCurve* cost)
    : inner_(std::move(inner)), cost_(cost) {
  if (!inner_ || !cost_) throw std::invalid_argument("CostAwareDrafter needs a drafter and a cost");
}

double CostAwareDrafter::acceptance() const {
  return static_cast<double>(kept_ + 1) / static_cast<double>(kept_ + rejections_ + 2);
}

int64_t CostAwareDrafter::best_length(int64_t n) const {
  const double a = acceptance();
  int64_t best = 0;
  double best_rate = 1.0, expected = 1.0, term = 1.0;
  for (int64_t k = 1; k <= std::min<int64_t>(n, VerifyCostCurve::kMaxTokens - 1); ++k) {
    term *= a;
    expected += term;
    const double rate = expected / cost_->relative(static_cast<int>(k + 1));
    if (rate > best_rate) {
      best_rate = rate;
      best = k;
    }
  }
  return best;
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
  std::vector<int32_t> draft = inner_->propose(context, max_tokens);
  int64_t keep = best_length(static_cast<int64_t>(draft.size()));
  if (keep == 0 && !draft.empty() && ++declined_ % kProbeEvery == 0) keep = 1;
  draft.resize(static_cast<size_t>(keep));
  last_draft_ = draft;
  last_context_ = context.size();
  return draft;
}

}  // namespace strata
