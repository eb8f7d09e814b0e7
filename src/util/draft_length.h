#pragma once
// The draft length that pays best, shared by the runtime's cost model (measured costs) and the
// planner's prediction (modelled costs): with a per-token acceptance a, a step that checks k
// drafted tokens yields 1 + a + ... + a^k tokens on average and costs cost(k + 1) one-token
// steps. k = 0 (no draft: 1 token for 1) wins unless some k beats it.

#include <cstdint>

namespace strata {

struct DraftChoice {
  int64_t tokens = 0;    // drafted tokens to check (0: none)
  double speedup = 1.0;  // expected tokens per one-token step of time
};

// cost(b): the time of a b-token step relative to a one-token step (b >= 2).
template <typename Cost>
DraftChoice best_draft_length(double acceptance, int64_t max_tokens, Cost cost) {
  DraftChoice best;
  double expected = 1.0, term = 1.0;
  for (int64_t k = 1; k <= max_tokens; ++k) {
    term *= acceptance;
    expected += term;
    const double rate = expected / cost(k + 1);
    if (rate > best.speedup) best = {k, rate};
  }
  return best;
}

}  // namespace strata
