// The one-line summary of a placement that `strata run/serve/bench` log: where the layers are,
// how many experts stay in RAM and how many bytes they are (no device needed).

#include <gtest/gtest.h>

#include "backend/vulkan/gpu_model.h"
#include "model/hparams.h"
#include "plan/cost_model.h"

namespace strata::vk {
namespace {

TEST(PlacementSummary, CountsTheExpertsLeftInRam) {
  ModelHParams hp;
  hp.n_layer = 4;
  hp.n_expert = 8;
  plan::Placement p;
  p.embeddings_device = plan::kCpuDevice;
  p.output_device = 1;
  p.layers.resize(4);
  for (size_t il = 0; il < p.layers.size(); ++il) {
    p.layers[il].attention_device = 1;
    p.layers[il].expert_device.assign(8, 1);
  }
  p.layers[0].expert_device.assign(8, plan::kCpuDevice);  // one layer wholly in RAM
  for (int e = 0; e < 3; ++e) p.layers[1].expert_device[static_cast<size_t>(e)] = 1;
  for (int e = 3; e < 8; ++e) p.layers[1].expert_device[static_cast<size_t>(e)] = plan::kCpuDevice;

  const uint64_t one_expert = 3 << 20;  // 3 MiB: 13 experts in RAM are 39 MiB
  const std::string s = describe_placement(p, hp, {"vk0"}, one_expert);
  EXPECT_NE(s.find("all 4 layers on vk0"), std::string::npos) << s;
  EXPECT_NE(s.find("2 layers' experts whole on their GPU, 1 layers' wholly in RAM, 3 single "
                   "experts on a GPU; 13 experts (39.00 MiB) in RAM"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("token embeddings in RAM; output head on vk0"), std::string::npos) << s;
}

}  // namespace
}  // namespace strata::vk
