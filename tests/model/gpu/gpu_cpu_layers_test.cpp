// Plans with whole layers on the CPU (llama.cpp's -ngl N below the layer count, or a GPU too
// small for every layer's attention): the CPU runs those layers from RAM with its own kernels
// (attention over the host KV cache, Gated DeltaNet over the host state), the GPUs the rest, the
// hidden states moving through host memory between them; the output head runs where the plan
// says. Every oracle model (../shared/oracle and gdn/) is held to the whole-GPU tests'
// thresholds against the independent engine with the first half of the layers and the head on
// the CPU; greedy tokens equal the CPU's on F16 models for every way the runs can follow each
// other; batched serving equals single sequences.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "backend/vulkan/gpu_model.h"
#include "gpu_oracle_cases.h"
#include "model/oracle_compare.h"
#include "runtime/session.h"
#include "support/greedy_jobs.h"
#include "support/test_support.h"
#include "synthetic_model.h"
#include "unit/vulkan/gpu_test_device.h"

namespace strata::test {
namespace {

constexpr int kCpu = plan::kCpuDevice;

// layer_devices: each layer's device (0 the CPU, 1 and 2 the GPUs); a layer's experts go with it.
plan::Placement placement_of(const ModelHParams& hp, const std::vector<int>& layer_devices,
                             int output) {
  plan::Placement p;
  p.output_device = output;
  p.embeddings_device = layer_devices.front() == kCpu ? kCpu : layer_devices.front();
  p.layers.resize(static_cast<size_t>(hp.n_layer));
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    plan::LayerPlacement& l = p.layers[static_cast<size_t>(il)];
    l.attention_device = layer_devices[static_cast<size_t>(il)];
    l.expert_device.assign(static_cast<size_t>(hp.n_expert), l.attention_device);
  }
  return p;
}

// -ngl n_layer/2: the first layers and the output head on the CPU.
plan::Placement first_half_on_cpu(const ModelHParams& hp) {
  std::vector<int> devices(static_cast<size_t>(hp.n_layer), 1);
  std::fill(devices.begin(), devices.begin() + std::max<int64_t>(hp.n_layer / 2, 1), kCpu);
  return placement_of(hp, devices, kCpu);
}

class GpuCpuLayersLogits : public testing::TestWithParam<GpuOracleCase> {};

TEST_P(GpuCpuLayersLogits, MatchesReferenceEngine) {
  const GpuOracleCase& c = GetParam();
  const auto reference = LogitsFile::read(c.logits);
  const plan::Placement placement = first_half_on_cpu(hparams_of(c.model));
  auto gpu = vk::load_gpu_model(c.model, vk::test::shared_test_device(), &placement);
  const auto ours = teacher_forced_logits(*gpu, reference, c.kv_type, 2);
  expect_whole_gpu_thresholds(c, compare_logits(reference, ours), "first half on the CPU");
  // The step's timeline: the CPU's run of the first layers, then the hop onto the GPU.
  const vk::HybridTimeline& t = *vk::hybrid_timeline(*gpu);
  ASSERT_EQ(t.stages.size(), 2u);
  EXPECT_TRUE(t.stages[0].cpu_layers);
  EXPECT_EQ(t.stages[0].first_layer, 0);
  EXPECT_FALSE(t.stages[1].cpu_layers);
  EXPECT_EQ(t.stages[1].first_layer, t.stages[0].last_layer);
}

INSTANTIATE_TEST_SUITE_P(AllModels, GpuCpuLayersLogits, testing::ValuesIn(gpu_oracle_cases(false)),
                         [](const auto& info) { return gpu_case_name(info.param); });

TEST(GpuCpuLayersLogits, EveryReferenceFileIsCovered) {
  EXPECT_GE(gpu_oracle_cases(false).size(), 23u + 2);  // ../shared/oracle/logits and gdn/
}

// F16 weights: the CPU's tokens step for step whichever way the runs follow each other (the
// CPU first or last, the head on either side, a CPU layer between two GPUs), on a standard MoE
// model, a dense one and a synthetic qwen35moe with both layer kinds and a shared expert.
TEST(GpuCpuLayers, SameTokensAsTheCpuOnF16Models) {
  tools::SyntheticModelSpec spec;
  spec.arch = "qwen35moe";
  spec.ftype = "F16";
  spec.n_layer = 5;
  spec.n_rot = 32;
  const std::string synthetic = (temp_dir() / "gpu-cpu-layers-qwen35moe-f16.gguf").string();
  tools::write_synthetic_model(spec, synthetic);
  const std::vector<int32_t> prompt = {1, 17, 300, 42, 7, 99, 256, 3};
  ThreadPool pool(2);
  for (const std::string& path :
       {(oracle_dir() / "models" / "tiny-qwen3moe-F16.gguf").string(),
        (oracle_dir() / "models" / "tiny-llama-F16.gguf").string(), synthetic}) {
    SCOPED_TRACE(path);
    auto cpu = Model::load(path);
    const ModelHParams& hp = cpu->hparams();
    const std::vector<int32_t> expected = session_greedy(*cpu, prompt, 24, pool);
    const auto n = static_cast<size_t>(hp.n_layer);
    std::vector<int> cpu_last(n, 1), sandwich(n, 1), between_gpus(n, 1);
    cpu_last.back() = kCpu;
    sandwich.front() = sandwich.back() = kCpu;
    for (size_t l = n / 2; l < n; ++l) between_gpus[l] = 2;
    between_gpus[n / 2] = kCpu;
    struct Shape {
      const char* what;
      plan::Placement placement;
    };
    std::vector<Shape> shapes = {
        {"first half and head on the CPU", first_half_on_cpu(hp)},
        {"last layer on the CPU, head on the CPU", placement_of(hp, cpu_last, kCpu)},
    };
    if (n >= 3) {  // the synthetic model
      shapes.push_back({"CPU, GPU, CPU; head on the CPU", placement_of(hp, sandwich, kCpu)});
      shapes.push_back({"GPU0, CPU, GPU1; head on GPU1", placement_of(hp, between_gpus, 2)});
    }
    for (const Shape& shape : shapes) {
      SCOPED_TRACE(shape.what);
      auto gpu = vk::load_gpu_model(
          path, {vk::test::shared_test_device(), vk::test::second_test_device()}, &shape.placement);
      EXPECT_EQ(session_greedy(*gpu, prompt, 24, pool), expected);
    }
  }
}

// The scheduler's continuous batches with the first layers on the CPU (paged KV on the host for
// them, on the device for the rest; GDN states split the same way) generate what each prompt
// generates alone.
TEST(GpuCpuLayers, BatchedGenerationsMatchSingleSequences) {
  for (const std::string& path :
       {(oracle_dir() / "models" / "tiny-qwen3moe-Q4_K_M.gguf").string(),
        (oracle_dir() / "gdn" / "models" / "tiny-qwen35moe-Q8_0.gguf").string()}) {
    SCOPED_TRACE(path);
    const plan::Placement placement = first_half_on_cpu(hparams_of(path));
    auto model = vk::load_gpu_model(path, vk::test::shared_test_device(), &placement);
    ThreadPool pool(2);
    expect_batched_generations_match_sessions(*model, pool);
  }
}

// The GPU holds only its layers: fewer device bytes than the whole model, and what a plan with
// CPU layers cannot be is refused with the reason.
TEST(GpuCpuLayers, TheGpuHoldsOnlyItsLayersAndBadPlansAreClearErrors) {
  const std::string path = (oracle_dir() / "models" / "tiny-qwen3moe-Q4_K_M.gguf").string();
  const ModelHParams hp = hparams_of(path);
  auto device = std::make_shared<vk::Device>(vk::test::shared_test_device()->info());
  const plan::Placement half = first_half_on_cpu(hp);
  {
    auto model = vk::load_gpu_model(path, device, &half);
    const uint64_t with_cpu_layers = device->device_local_bytes();
    auto whole_device = std::make_shared<vk::Device>(vk::test::shared_test_device()->info());
    auto whole = vk::load_gpu_model(path, whole_device);
    EXPECT_LT(with_cpu_layers, whole_device->device_local_bytes() * 3 / 4);
  }
  const auto error_of = [&](const plan::Placement& p) -> std::string {
    try {
      vk::load_gpu_model(path, vk::test::shared_test_device(), &p);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  plan::Placement gpu_expert_on_cpu_layer = half;
  gpu_expert_on_cpu_layer.layers[0].expert_device[1] = 1;
  EXPECT_NE(error_of(gpu_expert_on_cpu_layer).find("expert 1 of layer 0 on GPU0"),
            std::string::npos)
      << error_of(gpu_expert_on_cpu_layer);
  plan::Placement embeddings_on_gpu = half;
  embeddings_on_gpu.embeddings_device = 1;
  EXPECT_NE(error_of(embeddings_on_gpu).find("token embeddings on GPU0"), std::string::npos)
      << error_of(embeddings_on_gpu);
  plan::Placement all_cpu = placement_of(hp, std::vector<int>(2, kCpu), kCpu);
  EXPECT_NE(error_of(all_cpu).find("--device none"), std::string::npos) << error_of(all_cpu);
}

}  // namespace
}  // namespace strata::test
