// Hybrid plans on the Vulkan test device (lavapipe in CI): attention, norms, routers and shared
// experts on the GPU, routed experts split between the GPU and RAM, the CPU computing its experts
// during the GPU's step. Every MoE oracle model (../shared/oracle and gdn/) under (c) the experts
// of some layers in RAM and (d) one layer's experts split by a recorded profile is held to the
// whole-GPU test's thresholds against the independent engine; greedy tokens equal the CPU's on
// F16 weights; batched serving equals single sequences; the CPU's work overlaps the GPU's.
//
// The CPU computes its experts from the unrounded FFN input with its own activation
// quantization, exactly as the CPU path does, and the GPU adds that partial sum to its own:
// only the summation order differs from the whole-GPU run, so the thresholds do not move.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <numeric>

#include "backend/vulkan/gpu_model.h"
#include "gpu_oracle_cases.h"
#include "model/decoder_model.h"
#include "model/oracle_compare.h"
#include "runtime/session.h"
#include "support/greedy_jobs.h"
#include "support/test_support.h"
#include "synthetic_model.h"
#include "unit/vulkan/gpu_test_device.h"

namespace strata::test {
namespace {

// (c) llama.cpp's --n-cpu-moe: every expert of layers 0..n-1 in RAM, and the token embeddings
// (llama.cpp keeps them in RAM too: the host looks the rows up).
plan::Placement first_layers_in_ram(const ModelHParams& hp, int n) {
  plan::Placement p = all_on_gpu(hp);
  p.embeddings_device = 0;
  for (int l = 0; l < n; ++l)
    std::fill(p.layers[l].expert_device.begin(), p.layers[l].expert_device.end(), 0);
  return p;
}

// Expert selections of the CPU model over `tokens` ([layer * n_expert + e]): a recorded profile.
std::vector<uint64_t> profile_counts(const std::string& path, const std::vector<int32_t>& tokens) {
  auto cpu = Model::load(path);
  const ModelHParams& hp = cpu->hparams();
  ThreadPool pool(2);
  Session session(*cpu, static_cast<int64_t>(tokens.size()) + 1, GgmlType::F16, pool);
  session.stats().expert_counts.assign(static_cast<size_t>(hp.n_layer * hp.n_expert), 0);
  std::vector<float> logits;
  session.eval(tokens, false, logits);
  return session.stats().expert_counts;
}

// (d) layer `layer`'s busiest half of the experts (by the profile) on the GPU, the rest in RAM.
plan::Placement split_by_profile(const ModelHParams& hp, const std::vector<uint64_t>& counts,
                                 int64_t layer) {
  plan::Placement p = all_on_gpu(hp);
  std::vector<int> order(static_cast<size_t>(hp.n_expert));
  std::iota(order.begin(), order.end(), 0);
  const auto count = [&](int e) { return counts[static_cast<size_t>(layer * hp.n_expert + e)]; };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return count(a) > count(b); });
  auto& experts = p.layers[static_cast<size_t>(layer)].expert_device;
  for (size_t i = order.size() / 2; i < order.size(); ++i) experts[order[i]] = 0;
  return p;
}

// Every expert of every layer split in half (even ids on the GPU): both sides busy each layer.
plan::Placement halves(const ModelHParams& hp) {
  plan::Placement p = all_on_gpu(hp);
  for (auto& l : p.layers)
    for (size_t e = 0; e < l.expert_device.size(); ++e) l.expert_device[e] = e % 2 == 0 ? 1 : 0;
  return p;
}

// ---- against the oracle -----------------------------------------------------------------

struct SplitCase {
  GpuOracleCase file;
  std::string placement;  // "first-layers-in-ram" or "profile-split"
};

void PrintTo(const SplitCase& c, std::ostream* os) {
  *os << std::filesystem::path(c.file.logits).filename().string() << " " << c.placement;
}

std::vector<SplitCase> split_cases() {
  std::vector<SplitCase> out;
  for (const GpuOracleCase& c : gpu_oracle_cases(/*moe_only=*/true)) {
    for (const char* placement : {"first-layers-in-ram", "profile-split"})
      out.push_back({c, placement});
  }
  return out;
}

class GpuSplitPlanLogits : public testing::TestWithParam<SplitCase> {};

TEST_P(GpuSplitPlanLogits, MatchesReferenceEngine) {
  const SplitCase& c = GetParam();
  const auto reference = LogitsFile::read(c.file.logits);
  const ModelHParams hp = hparams_of(c.file.model);
  const plan::Placement placement =
      c.placement == "first-layers-in-ram"
          ? first_layers_in_ram(hp, static_cast<int>(std::max<int64_t>(hp.n_layer / 2, 1)))
          : split_by_profile(hp, profile_counts(c.file.model, reference.prompt), hp.n_layer - 1);
  auto gpu = vk::load_gpu_model(c.file.model, vk::test::shared_test_device(), &placement);
  const auto ours = teacher_forced_logits(*gpu, reference, c.file.kv_type, 2);
  const auto* timeline = vk::hybrid_timeline(*gpu);
  ASSERT_NE(timeline, nullptr);
  EXPECT_FALSE(timeline->layers.empty()) << "no layer handed experts to the CPU";
  expect_whole_gpu_thresholds(c.file, compare_logits(reference, ours), c.placement);
}

INSTANTIATE_TEST_SUITE_P(MoeModels, GpuSplitPlanLogits, testing::ValuesIn(split_cases()),
                         [](const testing::TestParamInfo<SplitCase>& info) {
                           return gpu_case_name(info.param.file, "_" + info.param.placement);
                         });

TEST(GpuSplitPlanLogits, EveryMoeReferenceFileIsCovered) {
  EXPECT_GE(split_cases().size(), 2u * 14);  // 14 qwen3moe files, and the gdn ones
}

// ---- greedy tokens ----------------------------------------------------------------------

std::vector<int32_t> greedy(Model& model, const std::vector<int32_t>& prompt, int n) {
  ThreadPool pool(2);
  return session_greedy(model, prompt, n, pool);
}

// F16 weights: the split plans pick the CPU's tokens step for step (a standard MoE model and a
// synthetic F16 qwen35moe with both layer kinds and a shared expert).
TEST(GpuSplitPlanGreedy, SameTokensAsTheCpuOnF16Models) {
  tools::SyntheticModelSpec spec;
  spec.arch = "qwen35moe";
  spec.ftype = "F16";
  spec.n_layer = 5;
  spec.n_rot = 32;
  const std::string synthetic = (temp_dir() / "gpu-split-qwen35moe-f16.gguf").string();
  tools::write_synthetic_model(spec, synthetic);
  const std::vector<int32_t> prompt = {1, 17, 300, 42, 7, 99, 256, 3};
  for (const std::string& path :
       {(oracle_dir() / "models" / "tiny-qwen3moe-F16.gguf").string(), synthetic}) {
    SCOPED_TRACE(path);
    auto cpu = Model::load(path);
    const ModelHParams& hp = cpu->hparams();
    const std::vector<int32_t> expected = greedy(*cpu, prompt, 24);
    for (const plan::Placement& placement :
         {first_layers_in_ram(hp, 1), split_by_profile(hp, profile_counts(path, prompt), 0),
          halves(hp)}) {
      auto gpu = vk::load_gpu_model(path, vk::test::shared_test_device(), &placement);
      EXPECT_EQ(greedy(*gpu, prompt, 24), expected);
    }
  }
}

// ---- serving ----------------------------------------------------------------------------

// The scheduler's continuous batches (prompts split over steps, decode tokens of other slots in
// the same forward, a paged pool) under a profile-split plan generate what each prompt
// generates alone.
TEST(GpuSplitPlanScheduler, BatchedGenerationsMatchSingleSequences) {
  for (const std::string& path :
       {(oracle_dir() / "models" / "tiny-qwen3moe-Q4_K_M.gguf").string(),
        (oracle_dir() / "gdn" / "models" / "tiny-qwen35moe-Q8_0.gguf").string()}) {
    SCOPED_TRACE(path);
    const ModelHParams hp = hparams_of(path);
    const std::vector<std::vector<int32_t>> prompts = {prompt_of(5, 70), prompt_of(6, 3),
                                                       prompt_of(7, 33)};
    const plan::Placement placement =
        split_by_profile(hp, profile_counts(path, prompts[0]), hp.n_layer - 1);
    auto model = vk::load_gpu_model(path, vk::test::shared_test_device(), &placement);
    ThreadPool pool(2);
    expect_batched_generations_match_sessions(*model, pool);
  }
}

// ---- overlap ----------------------------------------------------------------------------

// The CPU computes its experts while the GPU computes its own for the same layer: in decode
// steps with half of every layer's experts on each side, the host finds the GPU's part of a
// layer still in flight when it starts its experts (the GPU waits on the host's semaphore only
// for the sum), and every hand-over is timed.
TEST(GpuSplitPlanOverlap, CpuExpertsRunWhileTheGpuSegmentIsInFlight) {
  const std::string path = (oracle_dir() / "models" / "tiny-qwen3moe-Q4_K_M.gguf").string();
  const ModelHParams hp = hparams_of(path);
  const plan::Placement placement = halves(hp);
  auto gpu = vk::load_gpu_model(path, vk::test::shared_test_device(), &placement);
  ThreadPool pool(1);
  Session session(*gpu, 64, GgmlType::F16, pool);
  std::vector<float> logits;
  session.eval(prompt_of(3, 12), false, logits);
  int overlapped = 0, spans = 0;
  for (int step = 0; step < 16; ++step) {
    const int32_t next = argmax(logits);
    session.eval(std::span<const int32_t>(&next, 1), false, logits);
    const vk::HybridTimeline& t = *vk::hybrid_timeline(*gpu);
    ASSERT_EQ(static_cast<int64_t>(t.layers.size()), hp.n_layer);
    for (const vk::CpuExpertSpan& s : t.layers) {
      ++spans;
      overlapped += s.gpu_busy_at_start;
      EXPECT_GE(s.cpu_ms, 0);
      EXPECT_LE(s.pairs, hp.n_expert_used);
    }
    EXPECT_GT(t.step_ms, 0);
  }
  std::printf("CPU expert work started with the GPU's part of the layer in flight: %d of %d\n",
              overlapped, spans);
  EXPECT_GT(overlapped, 0) << "the CPU never worked while a GPU segment was in flight";
}

// ---- memory -----------------------------------------------------------------------------

// A budget the whole model does not fit in: refused before any upload, naming the numbers; the
// same budget holds the plan with the experts of every layer in RAM.
TEST(GpuSplitPlanMemory, ExpertsInRamFitWhereTheWholeModelDoesNot) {
  const std::string path = (oracle_dir() / "models" / "tiny-qwen3moe-Q4_K_M.gguf").string();
  const ModelHParams hp = hparams_of(path);
  const uint64_t budget = std::filesystem::file_size(path) / 2;
  auto device = std::make_shared<vk::Device>(vk::test::shared_test_device()->info());
  device->set_memory_limit(budget);
  try {
    vk::load_gpu_model(path, device);
    FAIL() << "the whole model loaded into half its size";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the weights need"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--vram-budget"), std::string::npos) << e.what();
  }
  const plan::Placement in_ram = first_layers_in_ram(hp, static_cast<int>(hp.n_layer));
  auto model = vk::load_gpu_model(path, device, &in_ram);
  EXPECT_LE(device->allocated_bytes(), budget + (uint64_t{64} << 20));
  EXPECT_EQ(greedy(*model, {1, 2, 3}, 4).size(), 4u);
}

// Token embeddings the plan keeps in RAM are not uploaded (a token reads one row: the host looks
// it up), unless the output head shares the table.
TEST(GpuSplitPlanMemory, EmbeddingsInRamAreNotUploaded) {
  const std::string path = (oracle_dir() / "models" / "tiny-qwen3moe-Q4_K_M.gguf").string();
  auto cpu = Model::load(path, LoadMode::mmap);
  const auto* standard = dynamic_cast<const DecoderModel*>(cpu.get());
  ASSERT_NE(standard, nullptr);
  const bool tied = standard->output().data == standard->token_embd().data;
  uint64_t allocated[2] = {0, 0};
  for (int on_gpu = 0; on_gpu < 2; ++on_gpu) {
    plan::Placement p = all_on_gpu(cpu->hparams());
    p.embeddings_device = on_gpu;
    auto device = std::make_shared<vk::Device>(vk::test::shared_test_device()->info());
    auto model = vk::load_gpu_model(path, device, &p);
    allocated[on_gpu] = device->allocated_bytes();
    EXPECT_EQ(greedy(*model, {1, 2, 3}, 4), greedy(*cpu, {1, 2, 3}, 4));
  }
  const auto table = static_cast<uint64_t>(standard->token_embd().bytes());
  if (tied) {
    EXPECT_EQ(allocated[0], allocated[1]);
  } else {
    EXPECT_GE(allocated[1] - allocated[0], table) << "token_embd was uploaded anyway";
  }
}

// Plans this executor cannot run are refused with the reason.
TEST(GpuSplitPlanMemory, UnsupportedPlacementsAreClearErrors) {
  const std::string path = (oracle_dir() / "models" / "tiny-qwen3moe-Q4_K_M.gguf").string();
  const ModelHParams hp = hparams_of(path);
  const auto error_of = [&](const plan::Placement& p) -> std::string {
    try {
      vk::load_gpu_model(path, vk::test::shared_test_device(), &p);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  plan::Placement second_gpu_layer = all_on_gpu(hp);
  second_gpu_layer.layers[0].attention_device = 2;
  EXPECT_NE(error_of(second_gpu_layer).find("layer 0's attention on GPU1, and --device names 1"),
            std::string::npos)
      << error_of(second_gpu_layer);
  plan::Placement second_gpu = all_on_gpu(hp);
  second_gpu.layers[1].expert_device[3] = 2;
  EXPECT_NE(error_of(second_gpu).find("expert 3 of layer 1 on GPU1"), std::string::npos);
  plan::Placement short_plan = all_on_gpu(hp);
  short_plan.layers.pop_back();
  EXPECT_NE(error_of(short_plan).find("places 1 layers but the model has 2"), std::string::npos)
      << error_of(short_plan);
}

}  // namespace
}  // namespace strata::test
