#include "runtime/speculative/fallback_drafter.h"

#include <stdexcept>

namespace strata {

FallbackDrafter::FallbackDrafter(std::unique_ptr<Drafter> first, std::unique_ptr<Drafter> second)
    : first_(std::move(first)), second_(std::move(second)) {
  if (!first_ || !second_) throw std::invalid_argument("FallbackDrafter needs two drafters");
}

std::vector<int32_t> FallbackDrafter::propose(std::span<const int32_t> context,
                                              int64_t max_tokens) {
  std::vector<int32_t> draft = first_->propose(context, max_tokens);
  if (draft.empty()) draft = second_->propose(context, max_tokens);
  return draft;
}

bool FallbackDrafter::wants_hidden() const {
  return first_->wants_hidden() || second_->wants_hidden();
}

void FallbackDrafter::observe(int64_t position, std::span<const int32_t> tokens,
                              const float* hidden) {
  if (first_->wants_hidden()) first_->observe(position, tokens, hidden);
  if (second_->wants_hidden()) second_->observe(position, tokens, hidden);
}

}  // namespace strata
