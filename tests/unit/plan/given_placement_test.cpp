// llama.cpp-style flags turned into a placement and priced next to strata's plan.

#include <gtest/gtest.h>

#include "plan/given_placement.h"
#include "plan/hardware.h"
#include "plan/inventory.h"
#include "plan/placement.h"
#include "util/error.h"

namespace strata::plan {
namespace {

ModelInventory qwen3_30b() {
  return inventory_from_architecture(*architecture_preset("qwen3-coder-30b-a3b"),
                                     {0, parse_size("18.56G", 1000)});
}

// FIELD C2's machine.
HardwareProfile c2() {
  HardwareOverrides o;
  o.gpus = {"7.6G:448"};
  o.ram = "32G:44.8";
  o.cores = 6;
  return make_hardware_profile(o, {});
}

bool experts_on(const LayerPlacement& l, int device) {
  return std::all_of(l.expert_device.begin(), l.expert_device.end(),
                     [&](int d) { return d == device; });
}

std::string error_of(const ModelInventory& inv, const HardwareProfile& hw, const GivenFlags& f) {
  try {
    placement_from_flags(inv, hw, f);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The regex guides publish for "experts of layers 5 and up in RAM".
TEST(GivenPlacement, GuideRegexMovesTheNamedLayersExperts) {
  const ModelInventory inv = qwen3_30b();
  ASSERT_EQ(inv.n_layer, 48);
  GivenFlags f;
  f.overrides = {"blk\\.([5-9]|[1-9][0-9])\\.ffn_.*_exps=CPU"};
  const Placement p = placement_from_flags(inv, c2(), f);
  for (int l = 0; l < 48; ++l) {
    EXPECT_TRUE(experts_on(p.layers[l], l < 5 ? 1 : kCpuDevice)) << l;
    EXPECT_EQ(p.layers[l].attention_device, 1) << l;
  }
}

// -ot for the first N layers is --n-cpu-moe N; the first matching override wins.
TEST(GivenPlacement, RegexEqualsNCpuMoeAndFirstMatchWins) {
  const ModelInventory inv = qwen3_30b();
  const HardwareProfile hw = c2();
  GivenFlags regex, flag;
  regex.overrides = {"blk\\.([0-9]|[12][0-9]|3[0-5])\\.ffn_.*_exps=CPU"};
  flag.n_cpu_moe = 36;
  const Placement a = placement_from_flags(inv, hw, regex), b = placement_from_flags(inv, hw, flag);
  for (int l = 0; l < 48; ++l) EXPECT_EQ(a.layers[l].expert_device, b.layers[l].expert_device) << l;
  GivenFlags both;
  both.overrides = {"blk\\.7\\.ffn_.*_exps=GPU0", "ffn_.*_exps=CPU"};
  const Placement c = placement_from_flags(inv, hw, both);
  EXPECT_TRUE(experts_on(c.layers[7], 1));
  EXPECT_TRUE(experts_on(c.layers[8], kCpuDevice));
}

TEST(GivenPlacement, GpuLayersKeepsTheFirstLayersOnTheCpu) {
  const ModelInventory inv = qwen3_30b();
  GivenFlags f;
  f.gpu_layers = 40;
  const Placement p = placement_from_flags(inv, c2(), f);
  for (int l = 0; l < 48; ++l) {
    EXPECT_EQ(p.layers[l].attention_device, l < 8 ? kCpuDevice : 1) << l;
    EXPECT_TRUE(experts_on(p.layers[l], l < 8 ? kCpuDevice : 1)) << l;
  }
}

TEST(GivenPlacement, BadFlagsSayWhatIsWrong) {
  const ModelInventory inv = qwen3_30b();
  const HardwareProfile hw = c2();
  GivenFlags f;
  f.overrides = {"blk\\.([0-9]=CPU"};
  EXPECT_NE(error_of(inv, hw, f).find("not a regular expression"), std::string::npos);
  f.overrides = {"ffn_.*_exps=GPU1"};
  EXPECT_NE(error_of(inv, hw, f).find("the plan has 1 GPU(s)"), std::string::npos);
  f.overrides = {"ffn_.*_exps=TPU"};
  EXPECT_NE(error_of(inv, hw, f).find("unknown device 'TPU'"), std::string::npos);
  f.overrides = {"ffn_.*_exps"};
  EXPECT_NE(error_of(inv, hw, f).find("expected REGEX=DEVICE"), std::string::npos);
  f.overrides = {"blk\\.3\\.ffn_down_exps=CPU"};
  EXPECT_NE(error_of(inv, hw, f).find("layer 3's expert tensors"), std::string::npos);
  f.overrides = {"ffn_.*_exps=CUDA0"};  // llama.cpp's device names work
  EXPECT_EQ(error_of(inv, hw, f), "");
}

// FIELD C2's published command (Q4_K_M, --n-cpu-moe 36, 36,864 q8_0 context: 37.5 tok/s) priced
// through the flags: within 50% (field_replay_test.cpp says why C2 is read slower than it ran),
// it fits, and strata's own plan is at least as fast.
TEST(GivenPlacement, FieldC2PublishedFlagsPriced) {
  const ModelInventory inv = qwen3_30b();
  const HardwareProfile hw = c2();
  GivenFlags f;
  f.n_cpu_moe = 36;
  const GivenEvaluation g = evaluate_given(inv, hw, f, 36864, "q8_0");
  EXPECT_TRUE(g.fits) << g.fit_error;
  EXPECT_NEAR(g.decode.tokens_per_second() / 37.5, 1.0, 0.5) << g.decode.tokens_per_second();
  PlanGoals goals;
  goals.context = 36864;
  goals.kv_type = "q8_0";
  EXPECT_GE(plan_placement(inv, hw, goals).decode.tokens_per_second(),
            g.decode.tokens_per_second() * 0.999);
  // Far fewer layers in RAM do not fit the 7.6 GiB card, and the error says where.
  f.n_cpu_moe = 20;
  const GivenEvaluation tight = evaluate_given(inv, hw, f, 36864, "q8_0");
  EXPECT_FALSE(tight.fits);
  EXPECT_NE(tight.fit_error.find("GPU0 needs"), std::string::npos) << tight.fit_error;
}

}  // namespace
}  // namespace strata::plan
