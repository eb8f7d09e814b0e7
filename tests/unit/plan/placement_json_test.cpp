// A saved `strata plan --json` read back as a placement (what `--plan FILE` executes).

#include <gtest/gtest.h>

#include "gguf/gguf_file.h"
#include "plan/hardware.h"
#include "plan/inventory.h"
#include "plan/placement.h"
#include "plan/report.h"
#include "support/test_support.h"
#include "util/error.h"

namespace strata::plan {
namespace {

struct Planned {
  ModelInventory inv;
  HardwareProfile hw;
  Plan plan;
};

// The tiny MoE model on a GPU with room for its dense weights and some single experts.
Planned tiny_split_plan() {
  Planned p{inventory_from_gguf(GgufFile::open(
                (test::oracle_dir() / "models" / "tiny-qwen3moe-Q8_0.gguf").string())),
            {},
            {}};
  HardwareOverrides o;
  o.gpus = {"1400K:448"};
  o.ram = "16G:20";
  o.cores = 4;
  p.hw = make_hardware_profile(o, {});
  PlanGoals goals;
  goals.context = 256;
  MemoryConstants memory;
  memory.gpu_runtime_margin_bytes = 0;
  p.plan = plan_placement(p.inv, p.hw, goals, default_cost_constants(), memory);
  return p;
}

TEST(PlacementJson, RoundTripsThePlannersPlacement) {
  const Planned p = tiny_split_plan();
  ASSERT_TRUE(p.plan.fits) << p.plan.fit_error;
  ASSERT_GT(p.plan.cpu_expert_layers, 0) << "the test wants experts in RAM";
  const Placement back = placement_from_json(plan_json(p.inv, p.hw, p.plan, {}), p.inv, 1);
  ASSERT_EQ(back.layers.size(), p.plan.placement.layers.size());
  for (size_t l = 0; l < back.layers.size(); ++l) {
    EXPECT_EQ(back.layers[l].attention_device, p.plan.placement.layers[l].attention_device);
    EXPECT_EQ(back.layers[l].expert_device, p.plan.placement.layers[l].expert_device);
  }
  EXPECT_EQ(back.output_device, p.plan.placement.output_device);
  EXPECT_EQ(back.embeddings_device, p.plan.placement.embeddings_device);
}

TEST(PlacementJson, BadPlansNameTheProblem) {
  const Planned p = tiny_split_plan();
  const nlohmann::json good = plan_json(p.inv, p.hw, p.plan, {});
  const auto error_of = [&](const nlohmann::json& j, int gpus = 1) -> std::string {
    try {
      placement_from_json(j, p.inv, gpus);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error_of(good), "");
  EXPECT_NE(error_of(nlohmann::json::array()).find("strata plan --json"), std::string::npos);
  nlohmann::json fewer = good;
  fewer["layers"].erase(fewer["layers"].begin());
  EXPECT_NE(error_of(fewer).find("1 layers in the plan"), std::string::npos) << error_of(fewer);
  nlohmann::json gpu1 = good;
  gpu1["layers"][0]["attention"] = "GPU1";
  EXPECT_NE(error_of(gpu1).find("expected CPU or GPU0..GPU0"), std::string::npos) << error_of(gpu1);
  EXPECT_EQ(error_of(gpu1, 2), "");
  nlohmann::json twice = good;
  twice["layers"][1]["experts"]["CPU"].push_back(twice["layers"][1]["experts"].begin()->at(0));
  EXPECT_NE(error_of(twice).find("twice"), std::string::npos) << error_of(twice);
  nlohmann::json missing = good;
  missing["layers"][0]["experts"] = nlohmann::json::object();
  EXPECT_NE(error_of(missing).find("does not place expert 0"), std::string::npos)
      << error_of(missing);
  nlohmann::json outside = good;
  outside["layers"][0]["experts"]["CPU"] = {99};
  EXPECT_NE(error_of(outside).find("expert 99"), std::string::npos) << error_of(outside);
}

}  // namespace
}  // namespace strata::plan
