#include "runtime/speculative/verify_cost.h"

#include <algorithm>

namespace strata {
namespace {
// Moving average weight of a new step: recent steps count most (the context grows, the machine
// gets busy).
constexpr double kNewWeight = 0.1;
}  // namespace

void VerifyCostCurve::record(int tokens, double seconds) {
  if (tokens < 1 || tokens > kMaxTokens || !(seconds > 0)) return;
  auto& s = seconds_[static_cast<size_t>(tokens)];
  auto& n = samples_[static_cast<size_t>(tokens)];
  // The first step of a size is a warm-up (buffers sized, code paged in): the second replaces
  // it. Then a plain mean of a few steps, then a step counts at most twice (or half) the average:
  // a slow step (a page fault, another process) moves it by 10%, a lasting change in a few steps.
  const double w = n == 1 ? 1.0 : std::max(kNewWeight, 1.0 / static_cast<double>(n));
  if (n >= 3) seconds = std::clamp(seconds, 0.5 * s, 2.0 * s);
  s = n == 0 ? seconds : s + w * (seconds - s);
  ++n;
}

int64_t VerifyCostCurve::samples(int tokens) const {
  return tokens < 1 || tokens > kMaxTokens ? 0 : samples_[static_cast<size_t>(tokens)];
}

double VerifyCostCurve::relative(int tokens) const {
  if (tokens <= 1) return 1.0;
  tokens = std::min(tokens, kMaxTokens);
  const double guess = 1.0 + kGuessPerExtraToken * (tokens - 1);
  if (samples_[1] == 0) return guess;
  const double measured = estimated(tokens);
  return samples_[static_cast<size_t>(tokens)] < kTrustedSamples ? std::min(measured, guess)
                                                                 : measured;
}

double VerifyCostCurve::estimated(int tokens) const {
  const double one = seconds_[1];
  if (samples_[static_cast<size_t>(tokens)] > 0)
    return std::max(1.0, seconds_[static_cast<size_t>(tokens)] / one);
  // The nearest measured sizes below and above (size 1 always counts as measured).
  int below = 1, above = 0;
  for (int b = tokens - 1; b > 1; --b) {
    if (samples_[static_cast<size_t>(b)] > 0) {
      below = b;
      break;
    }
  }
  for (int b = tokens + 1; b <= kMaxTokens; ++b) {
    if (samples_[static_cast<size_t>(b)] > 0) {
      above = b;
      break;
    }
  }
  const double at_below = below == 1 ? 1.0 : seconds_[static_cast<size_t>(below)] / one;
  if (above) {
    const double at_above = seconds_[static_cast<size_t>(above)] / one;
    const double t = static_cast<double>(tokens - below) / (above - below);
    return std::max(1.0, at_below + t * (at_above - at_below));
  }
  // Past the largest measured size: at its cost per extra token (once tried, a size is measured).
  const double slope = below == 1 ? kGuessPerExtraToken : (at_below - 1.0) / (below - 1);
  return std::max(1.0, at_below + slope * (tokens - below));
}

}  // namespace strata
