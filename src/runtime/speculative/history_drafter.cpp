#include "runtime/speculative/history_drafter.h"

namespace strata {

std::vector<int32_t> HistoryDrafter::propose(std::span<const int32_t> context, int64_t max_tokens) {
  return history_.continuation(context, max_tokens, NgramIndex::kMaxMatch, &last_match_);
}

}  // namespace strata
