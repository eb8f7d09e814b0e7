// The planner's prediction of what speculative decoding gains (plan/speculation_estimate): the
// experts a B-token step reads (1 - (1 - k/E)^B per expert: 15.5 of Qwen3-30B-A3B's 128 for two
// tokens at top-8), verify costs that grow with B but stay below B separate steps, longer drafts
// and larger speed-ups as acceptance rises, no drafts where checks cost more than they gain, and
// experts on a GPU not counted as RAM reads; and the memory a rolled-back draft needs on a hybrid
// model (a copy of the recurrent state) in the plan's RAM.

#include <gtest/gtest.h>

#include <cmath>

#include "plan/architecture_presets.h"
#include "plan/hardware.h"
#include "plan/inventory.h"
#include "plan/placement.h"
#include "plan/speculation_estimate.h"

namespace strata::plan {
namespace {

Plan plan_on(const ModelInventory& inv, const char* gpu, int cores = 8) {
  HardwareOverrides o;
  o.gpus = {gpu};
  o.ram = "64G:50";
  o.cores = cores;
  PlanGoals goals;
  goals.context = 4096;
  return plan_placement(inv, make_hardware_profile(o, {}), goals);
}

TEST(SpeculationEstimate, VerifyStepsReadTheUnionOfTheirExperts) {
  const ModelInventory inv =
      inventory_from_architecture(*architecture_preset("qwen3-30b-a3b"), {0, 18'560'000'000});
  const Plan hybrid = plan_on(inv, "8G:448");  // most experts in RAM, arithmetic on the GPU
  ASSERT_TRUE(hybrid.fits);
  ASSERT_GT(hybrid.cpu_expert_layers, 0);
  const SpeculationEstimate s =
      estimate_speculation(inv, hybrid.placement, hybrid.decode, hybrid.prefill);
  EXPECT_NEAR(s.experts_per_layer[1], 8.0, 1e-9);
  EXPECT_NEAR(s.experts_per_layer[2], 128 * (1 - std::pow(1 - 8.0 / 128, 2)), 1e-9);  // 15.5
  EXPECT_NEAR(s.verify_cost[1], 1.0, 1e-12);
  for (int b = 2; b <= SpeculationEstimate::kMaxTokens; ++b) {
    EXPECT_GT(s.verify_cost[b], s.verify_cost[b - 1]) << b;
    EXPECT_LT(s.verify_cost[b], b) << "one step of " << b << " tokens beats " << b << " steps";
  }
  // The experts in RAM are most of a token: a second token costs well over nothing.
  EXPECT_GT(s.verify_cost[2], 1.15);

  ASSERT_EQ(s.gains.size(), std::size(kAcceptances));
  for (size_t i = 1; i < s.gains.size(); ++i) {
    EXPECT_GE(s.gains[i].draft_tokens, s.gains[i - 1].draft_tokens);
    EXPECT_GE(s.gains[i].speedup, s.gains[i - 1].speedup);
  }
  EXPECT_GE(s.gains.front().speedup, 1.0);
  EXPECT_GT(s.gains.back().speedup, 1.3) << "95% acceptance";
}

// An uncalibrated 2-core CPU: a token's arithmetic in a small batch (at the FLOP rate fitted
// for it) costs more than a decode step's reads, so no draft length pays and none is advised.
TEST(SpeculationEstimate, WhereChecksCostMoreThanTheyGainNothingIsDrafted) {
  const ModelInventory inv =
      inventory_from_architecture(*architecture_preset("qwen3-30b-a3b"), {0, 18'560'000'000});
  const Plan cpu = plan_on(inv, "none", 2);
  ASSERT_TRUE(cpu.fits);
  const SpeculationEstimate s = estimate_speculation(inv, cpu.placement, cpu.decode, cpu.prefill);
  for (int b = 1; b <= SpeculationEstimate::kMaxTokens; ++b)
    EXPECT_LE(s.verify_cost[b], b) << "never above " << b << " one-token steps";
  for (const SpeculationGain& g : s.gains) {
    EXPECT_EQ(g.draft_tokens, 0) << g.acceptance;
    EXPECT_DOUBLE_EQ(g.speedup, 1.0);
  }
}

TEST(SpeculationEstimate, ExpertsOnTheGpuMakeChecksCheaper) {
  const ModelInventory inv =
      inventory_from_architecture(*architecture_preset("qwen3-30b-a3b"), {0, 18'560'000'000});
  const Plan hybrid = plan_on(inv, "8G:448");
  const Plan gpu = plan_on(inv, "24G:1000");  // every expert on the GPU
  ASSERT_TRUE(hybrid.fits && gpu.fits);
  ASSERT_EQ(gpu.cpu_expert_layers, 0);
  const auto in_ram = estimate_speculation(inv, hybrid.placement, hybrid.decode, hybrid.prefill);
  const auto on_gpu = estimate_speculation(inv, gpu.placement, gpu.decode, gpu.prefill);
  EXPECT_LT(on_gpu.verify_cost[4], in_ram.verify_cost[4]);
  EXPECT_GE(on_gpu.gains[2].speedup, in_ram.gains[2].speedup);
}

// A hybrid's recurrent state is held three times in RAM on a CPU plan: the running state, the
// prefix cache's snapshot and the copy a rejected draft restores (the runtime's slot buffers).
TEST(SpeculationEstimate, TheRecurrentStatesCopiesAreCountedInTheRam) {
  const ModelInventory inv =
      inventory_from_architecture(*architecture_preset("qwen3.5-35b-a3b"), {0, 22'100'000'000});
  const Plan p = plan_on(inv, "none");
  ASSERT_TRUE(p.fits);
  uint64_t state = 0, kv = 0;
  for (size_t l = 0; l < inv.layers.size(); ++l) {
    state += inv.layers[l].recurrent_state_bytes;
    if (inv.layers[l].has_kv_cache)
      kv += static_cast<uint64_t>(inv.layer_kv_bytes_per_token(2.0) * p.context);
  }
  ASSERT_GT(state, 0u);
  EXPECT_EQ(p.devices[0].kv_bytes, kv + 3 * state);
}

}  // namespace
}  // namespace strata::plan
