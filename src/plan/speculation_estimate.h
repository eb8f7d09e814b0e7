#pragma once
// What speculative decoding can gain on a plan, before anything runs: the predicted cost of a
// verify step of B tokens against a one-token step, and the speed-up the best draft length gives
// at a given acceptance (the rule the runtime's cost model applies to measured costs:
// util/draft_length.h).
//
// A B-token step reads the dense weights once and each routed expert that any of its tokens
// selects once: per layer, sum over experts of 1 - (1 - p_e)^B, p_e the chance a token selects
// expert e (n_expert_used x its popularity: uniform, or a loaded profile). Only the experts in RAM
// are scaled so (GPU reads are counted as in a one-token step: a small share of the token where
// the plan keeps experts in RAM). Each token past the first also adds its arithmetic, at the
// prompt-processing rate per token times CostConstants::small_batch_arithmetic_factor, and its
// attention over the cache; the fixed per-layer costs are paid once. It is a prediction: `strata
// bench --verify 8` measures the same curve, and the server's cost model decides from measured
// steps.

#include <cstdint>
#include <vector>

#include "plan/cost_model.h"
#include "plan/inventory.h"

namespace strata::plan {

struct SpeculationGain {
  double acceptance = 0;     // per drafted token
  int64_t draft_tokens = 0;  // the best length to check (0: do not draft)
  double speedup = 1;        // tokens per one-token step of time
};

struct SpeculationEstimate {
  static constexpr int kMaxTokens = 16;
  std::vector<double> verify_cost;        // [B], B = 0..kMaxTokens (x a one-token step; [0] = 0)
  std::vector<double> experts_per_layer;  // [B] routed experts a B-token step reads (mean layer)
  std::vector<SpeculationGain> gains;     // at kAcceptances
};

inline constexpr double kAcceptances[] = {0.5, 0.6, 0.7, 0.8, 0.9, 0.95};

SpeculationEstimate estimate_speculation(const ModelInventory& inv, const Placement& placement,
                                         const DecodeEstimate& decode,
                                         const PrefillEstimate& prefill,
                                         const CostConstants& c = default_cost_constants());

}  // namespace strata::plan
