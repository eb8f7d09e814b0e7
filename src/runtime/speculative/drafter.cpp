#include "runtime/speculative/drafter.h"

#include <algorithm>

namespace strata {

std::vector<int32_t> ScriptedDrafter::propose(std::span<const int32_t> context,
                                              int64_t max_tokens) {
  ++calls_;
  if (context.size() < prompt_tokens_ || max_tokens <= 0) return {};
  const size_t generated = context.size() - prompt_tokens_;
  if (generated >= continuation_.size()) return {};
  const size_t n = std::min(continuation_.size() - generated, static_cast<size_t>(max_tokens));
  const auto first = continuation_.begin() + static_cast<std::ptrdiff_t>(generated);
  return {first, first + static_cast<std::ptrdiff_t>(n)};
}

}  // namespace strata
