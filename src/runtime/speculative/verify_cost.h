#pragma once
// What checking a draft costs on this machine and model: the time of a forward step of one
// sequence with B tokens fed (the last drawn token and B - 1 drafted ones), relative to a plain
// one-token step. Measured on the scheduler's own steps (a moving average per B), so it follows
// the device, the plan, the context depth and a busy machine. On an MoE model B tokens read the
// union of their experts, so B = 2 can cost nearly twice B = 1 where experts stream from RAM, and
// barely more where compute or overheads dominate: only a measurement tells.
//
// Used on the scheduler thread only (record by the scheduler, relative by drafters it calls).

#include <array>
#include <cstdint>

namespace strata {

class VerifyCostCurve {
 public:
  static constexpr int kMaxTokens = 16;
  // An unmeasured size is assumed to cost this much per extra token (a guess on the cheap side,
  // so that drafting gets tried, and so measured, where it may pay).
  static constexpr double kGuessPerExtraToken = 0.1;
  // A size measured fewer times than this counts at most at the guess, so it is tried until it
  // is known: one slow first step (cold buffers, code run for the first time, a busy machine)
  // must not rule a size out for the rest of the server's life.
  static constexpr int64_t kTrustedSamples = 4;

  // One step of one sequence with `tokens` fed took `seconds`.
  void record(int tokens, double seconds);
  // The cost of a `tokens`-token step in one-token steps (>= 1 when measured so; 1 for tokens
  // <= 1). Between measured sizes, interpolated; past the largest, extended at its slope; never
  // above the guess while the size has fewer than kTrustedSamples samples.
  double relative(int tokens) const;
  int64_t samples(int tokens) const;

 private:
  double estimated(int tokens) const;  // from the measurements alone

  std::array<double, kMaxTokens + 1> seconds_{};
  std::array<int64_t, kMaxTokens + 1> samples_{};
};

}  // namespace strata
