// A model split across two GPUs (case (e) of the hybrid executor): the test GPU opened twice,
// as `--device vk0,vk0` does, gives two logical devices with their own memory, queues and
// kernels. The plan keeps the first half of the layers on one and the rest on the other (the
// hidden states hop between them through host memory); on MoE files the experts of layer 0 also
// stay in RAM, so a step has CPU experts and a hop. Every oracle model (../shared/oracle and
// gdn/) is held to the whole-GPU tests' thresholds against the independent engine. The hop
// copies floats exactly and each stage runs the same kernels, so a split model computes the
// same bits as the same placement on one device: that is checked too (greedy tokens, batched
// serving).

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "backend/vulkan/gpu_model.h"
#include "gpu_oracle_cases.h"
#include "model/oracle_compare.h"
#include "runtime/session.h"
#include "support/greedy_jobs.h"
#include "support/test_support.h"
#include "unit/vulkan/gpu_test_device.h"

namespace strata::test {
namespace {

std::vector<std::shared_ptr<vk::Device>> two_devices() {
  return {vk::test::shared_test_device(), vk::test::second_test_device()};
}

// Layers [0, n/2) on GPU0 (plan device 1), the rest on GPU1 with the output head; the token
// embeddings on GPU0; experts on their layer's GPU except layer 0's when `layer0_in_ram`.
plan::Placement split_across_two(const ModelHParams& hp, bool layer0_in_ram) {
  plan::Placement p;
  p.embeddings_device = 1;
  p.output_device = hp.n_layer > 1 ? 2 : 1;
  p.layers.resize(static_cast<size_t>(hp.n_layer));
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    plan::LayerPlacement& l = p.layers[static_cast<size_t>(il)];
    l.attention_device = il < hp.n_layer / 2 ? 1 : 2;
    const int experts = il == 0 && layer0_in_ram ? plan::kCpuDevice : l.attention_device;
    l.expert_device.assign(static_cast<size_t>(hp.n_expert), experts);
  }
  return p;
}

// The same experts in RAM, every layer on one GPU.
plan::Placement one_device(const ModelHParams& hp, bool layer0_in_ram) {
  plan::Placement p = split_across_two(hp, layer0_in_ram);
  p.output_device = 1;
  for (plan::LayerPlacement& l : p.layers) {
    l.attention_device = 1;
    for (int& d : l.expert_device) d = d == plan::kCpuDevice ? d : 1;
  }
  return p;
}

class GpuTwoDevicesLogits : public testing::TestWithParam<GpuOracleCase> {};

TEST_P(GpuTwoDevicesLogits, MatchesReferenceEngine) {
  const GpuOracleCase& c = GetParam();
  const auto reference = LogitsFile::read(c.logits);
  const ModelHParams hp = hparams_of(c.model);
  const plan::Placement placement = split_across_two(hp, hp.n_expert > 0);
  auto gpu = vk::load_gpu_model(c.model, two_devices(), &placement);
  const auto ours = teacher_forced_logits(*gpu, reference, c.kv_type, 2);
  expect_whole_gpu_thresholds(c, compare_logits(reference, ours), "two devices");
  // Both devices hold part of the model.
  const std::vector<Model::DeviceMemory> memory = gpu->device_memory();
  ASSERT_EQ(memory.size(), 2u);
  EXPECT_NE(memory[0].device, memory[1].device);
  for (const Model::DeviceMemory& m : memory) EXPECT_GT(m.allocated_bytes, 0u) << m.device;
  // The status page's picture of the plan: each layer on its device, layer 0's experts in RAM.
  const std::vector<Model::LayerDevices> layers = gpu->layer_devices();
  ASSERT_EQ(static_cast<int64_t>(layers.size()), hp.n_layer);
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const Model::LayerDevices& l = layers[static_cast<size_t>(il)];
    const std::string& device = memory[il < hp.n_layer / 2 ? 0 : 1].device;
    EXPECT_EQ(l.attention, device) << "layer " << il;
    if (l.experts.empty()) continue;  // a dense layer
    const int64_t on_gpu = il == 0 ? 0 : hp.n_expert;
    using Count = std::pair<std::string, int64_t>;
    EXPECT_EQ(l.experts, (std::vector<Count>{{device, on_gpu}, {"CPU", hp.n_expert - on_gpu}}))
        << "layer " << il;
  }
  EXPECT_EQ(gpu->output_head_device(), memory[hp.n_layer > 1 ? 1 : 0].device);
  const auto* timeline = vk::hybrid_timeline(*gpu);
  ASSERT_NE(timeline, nullptr);
  // One hop: into the second device's layers.
  ASSERT_EQ(timeline->stages.size(), 1u);
  EXPECT_FALSE(timeline->stages[0].cpu_layers);
  EXPECT_EQ(timeline->stages[0].first_layer, hp.n_layer / 2);
  if (hp.n_expert > 0) {
    ASSERT_FALSE(timeline->layers.empty()) << "layer 0's experts were not computed by the CPU";
    EXPECT_EQ(timeline->layers.front().layer, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(AllModels, GpuTwoDevicesLogits, testing::ValuesIn(gpu_oracle_cases(false)),
                         [](const auto& info) { return gpu_case_name(info.param); });

TEST(GpuTwoDevicesLogits, EveryReferenceFileIsCovered) {
  EXPECT_GE(gpu_oracle_cases(false).size(), 23u + 2);  // ../shared/oracle/logits and gdn/
}

// The same bits as on one device: greedy tokens over 24 steps and every logit of the last one,
// for a standard MoE model (2 layers: one per device) and qwen35moe (Gated DeltaNet layers on
// the first device, attention on the second).
TEST(GpuTwoDevices, SameBitsAsOneDevice) {
  for (const std::string& path :
       {(oracle_dir() / "models" / "tiny-qwen3moe-Q4_K_M.gguf").string(),
        (oracle_dir() / "models" / "tiny-llama-Q8_0.gguf").string(),
        (oracle_dir() / "gdn" / "models" / "tiny-qwen35moe-Q8_0.gguf").string()}) {
    SCOPED_TRACE(path);
    const ModelHParams hp = hparams_of(path);
    const plan::Placement split = split_across_two(hp, hp.n_expert > 0);
    const plan::Placement whole = one_device(hp, hp.n_expert > 0);
    auto two = vk::load_gpu_model(path, two_devices(), &split);
    auto one = vk::load_gpu_model(path, vk::test::shared_test_device(), &whole);
    ThreadPool pool(2);
    std::vector<int32_t> tokens[2];
    std::vector<float> last[2];
    Model* models[2] = {two.get(), one.get()};
    for (int m = 0; m < 2; ++m) {
      Session session(*models[m], 64, GgmlType::F16, pool);
      session.eval(prompt_of(3, 9), false, last[m]);
      for (int i = 0; i < 24; ++i) {
        tokens[m].push_back(argmax(last[m]));
        session.eval(std::span<const int32_t>(&tokens[m].back(), 1), false, last[m]);
      }
    }
    EXPECT_EQ(tokens[0], tokens[1]);
    EXPECT_EQ(last[0], last[1]) << "the split model's logits differ from one device's";
  }
}

// The scheduler's continuous batches (prompts split over steps, several sequences per forward,
// a paged pool, GDN snapshots) across two devices generate what each prompt generates alone.
TEST(GpuTwoDevices, BatchedGenerationsMatchSingleSequences) {
  for (const std::string& path :
       {(oracle_dir() / "models" / "tiny-qwen3moe-Q4_K_M.gguf").string(),
        (oracle_dir() / "gdn" / "models" / "tiny-qwen35moe-Q8_0.gguf").string()}) {
    SCOPED_TRACE(path);
    const plan::Placement placement = split_across_two(hparams_of(path), true);
    auto model = vk::load_gpu_model(path, two_devices(), &placement);
    ThreadPool pool(2);
    expect_batched_generations_match_sessions(*model, pool);
  }
}

// Each device holds its own layers' weights (not a copy of the whole model), and the log line
// names both devices' layer ranges.
TEST(GpuTwoDevices, EachDeviceHoldsItsLayers) {
  const std::string path = (oracle_dir() / "gdn" / "models" / "tiny-qwen35moe-Q8_0.gguf").string();
  const ModelHParams hp = hparams_of(path);
  const plan::Placement split = split_across_two(hp, false);
  const plan::Placement whole = one_device(hp, false);
  const auto fresh = [](int opening) {
    return std::make_shared<vk::Device>(vk::test::shared_test_device()->info(), opening);
  };
  std::vector<std::shared_ptr<vk::Device>> devices = {fresh(0), fresh(1)};
  auto two = vk::load_gpu_model(path, devices, &split);
  auto single = fresh(0);
  auto one = vk::load_gpu_model(path, single, &whole);
  const uint64_t a = devices[0]->device_local_bytes(), b = devices[1]->device_local_bytes();
  const uint64_t all = single->device_local_bytes();
  std::printf("device-local bytes: %llu + %llu on two devices, %llu on one\n",
              static_cast<unsigned long long>(a), static_cast<unsigned long long>(b),
              static_cast<unsigned long long>(all));
  EXPECT_LT(a, all);
  EXPECT_LT(b, all);
  const std::string summary = two->placement_summary();
  EXPECT_NE(summary.find(fmt::format("layers 0-{} on {}", hp.n_layer / 2 - 1, devices[0]->label())),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find(fmt::format("layers {}-{} on {}", hp.n_layer / 2, hp.n_layer - 1,
                                     devices[1]->label())),
            std::string::npos)
      << summary;
}

// What each device of --device may hold: --vram-budget for each; without one, a CPU-type device
// (lavapipe) is not limited. (A real GPU named twice shares its free memory between the openings;
// no such GPU here.)
TEST(GpuTwoDevices, DeviceBudgets) {
  const int d = vk::test::test_device_index();
  EXPECT_EQ(vk::device_budgets({d, d}, 3 << 20), (std::vector<uint64_t>{3 << 20, 3 << 20}));
  if (vk::test::shared_test_device()->info().is_cpu) {
    EXPECT_EQ(vk::device_budgets({d, d}, 0), (std::vector<uint64_t>{0, 0}));
  } else {
    const uint64_t free = vk::test::shared_test_device()->info().device_local_budget;
    EXPECT_EQ(vk::device_budgets({d, d}, 0), (std::vector<uint64_t>{free / 2, free / 2}));
  }
}

// What a split cannot be is refused with the reason.
TEST(GpuTwoDevices, UnsupportedSplitsAreClearErrors) {
  const std::string path = (oracle_dir() / "models" / "tiny-qwen3moe-Q4_K_M.gguf").string();
  const ModelHParams hp = hparams_of(path);
  const auto error_of = [&](const plan::Placement& p) -> std::string {
    try {
      vk::load_gpu_model(path, two_devices(), &p);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  plan::Placement head_elsewhere = split_across_two(hp, false);
  head_elsewhere.output_device = 1;
  EXPECT_NE(error_of(head_elsewhere).find("output head on GPU0"), std::string::npos)
      << error_of(head_elsewhere);
  plan::Placement expert_elsewhere = split_across_two(hp, false);
  expert_elsewhere.layers[0].expert_device[2] = 2;
  EXPECT_NE(error_of(expert_elsewhere).find("expert 2 of layer 0 on GPU1"), std::string::npos)
      << error_of(expert_elsewhere);
  plan::Placement third_gpu = split_across_two(hp, false);
  third_gpu.layers[1].attention_device = 3;
  EXPECT_NE(error_of(third_gpu).find("layer 1's attention on GPU2"), std::string::npos)
      << error_of(third_gpu);
}

}  // namespace
}  // namespace strata::test
