#include "plan/speculation_estimate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "util/draft_length.h"

namespace strata::plan {
namespace {

// Chance a token selects expert e of layer l: n_expert_used slots, each this expert with its
// popularity (at most 1).
double selection_chance(const ModelInventory& inv, size_t l, size_t e) {
  const double share = l < inv.popularity.size() && e < inv.popularity[l].size()
                           ? inv.popularity[l][e]
                           : 1.0 / inv.n_expert;
  return std::min(1.0, inv.n_expert_used * share);
}

}  // namespace

SpeculationEstimate estimate_speculation(const ModelInventory& inv, const Placement& placement,
                                         const DecodeEstimate& decode,
                                         const PrefillEstimate& prefill, const CostConstants& c) {
  constexpr int kMax = SpeculationEstimate::kMaxTokens;
  SpeculationEstimate out;
  out.verify_cost.assign(kMax + 1, 0.0);
  out.experts_per_layer.assign(kMax + 1, 0.0);
  // Expected routed experts a B-token step reads: all of them, and those in RAM.
  std::vector<double> in_ram(kMax + 1, 0.0);
  int moe_layers = 0;
  for (size_t l = 0; l < inv.layers.size(); ++l) {
    if (inv.layers[l].expert_bytes == 0 || inv.n_expert == 0) continue;
    ++moe_layers;
    for (int e = 0; e < inv.n_expert; ++e) {
      const double p = selection_chance(inv, l, static_cast<size_t>(e));
      const bool ram = l >= placement.layers.size() ||
                       static_cast<size_t>(e) >= placement.layers[l].expert_device.size() ||
                       placement.layers[l].expert_device[static_cast<size_t>(e)] == kCpuDevice;
      for (int b = 1; b <= kMax; ++b) {
        const double read = 1.0 - std::pow(1.0 - p, b);
        out.experts_per_layer[static_cast<size_t>(b)] += read;
        if (ram) in_ram[static_cast<size_t>(b)] += read;
      }
    }
  }
  if (moe_layers > 0) {
    for (double& v : out.experts_per_layer) v /= moe_layers;
  }

  const double weights = std::accumulate(decode.weight_ms.begin(), decode.weight_ms.end(), 0.0);
  const double kv = std::accumulate(decode.kv_ms.begin(), decode.kv_ms.end(), 0.0);
  const double arithmetic_per_token =
      (prefill.compute_ms + prefill.serial_ms) / std::max(1, c.prefill_micro_batch);
  // A one-token step as the plan predicts it, plus per extra token: the experts it adds to the
  // reads, its arithmetic at the small-batch rate, and its attention over the cache.
  const double one = weights + kv + decode.fixed_ms + decode.hop_ms;
  for (int b = 1; b <= kMax; ++b) {
    const double ram_scale = in_ram[1] > 0 ? in_ram[static_cast<size_t>(b)] / in_ram[1] : 1.0;
    const double more_reads = decode.cpu_expert_ms * (ram_scale - 1.0);
    const double step =
        one + more_reads + (b - 1) * (c.small_batch_arithmetic_factor * arithmetic_per_token + kv);
    // Never above b one-token steps: that is what checking the tokens one by one costs.
    out.verify_cost[static_cast<size_t>(b)] = one > 0 ? std::min<double>(b, step / one) : b;
  }

  for (double a : kAcceptances) {
    const DraftChoice best = best_draft_length(
        a, kMax - 1, [&](int64_t b) { return out.verify_cost[static_cast<size_t>(b)]; });
    out.gains.push_back({a, best.tokens, best.speedup});
  }
  return out;
}

}  // namespace strata::plan
