// Prompt batches that upload a layer's RAM experts instead of having the CPU compute them: the
// experts live in host-visible memory (pinned at load; the CPU computes decode steps from it), the
// GPU copies them into a device-local stack and computes those pairs as it computes the experts
// it holds.
// Each (token, expert) pair then comes from exactly one side, the other giving zeros, so a prompt
// batch has the bits of the same model wholly on the GPU: that is the check (the whole-GPU
// run is itself held to the oracle in gpu_oracle_logits_test.cpp), with the path forced by
// STRATA_PROMPT_EXPERTS=gpu. Decode steps still hand their RAM experts to the CPU.

#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>

#include "backend/vulkan/device_weights.h"
#include "backend/vulkan/gpu_model.h"
#include "gpu_oracle_cases.h"
#include "model/oracle_compare.h"
#include "runtime/session.h"
#include "support/greedy_jobs.h"
#include "support/test_support.h"
#include "unit/vulkan/gpu_test_device.h"

namespace strata::test {
namespace {

// The modes are read when the model is built: set around the load.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};
class ForcedPromptExperts : public ScopedEnv {
 public:
  explicit ForcedPromptExperts(const char* mode) : ScopedEnv("STRATA_PROMPT_EXPERTS", mode) {}
};

std::unique_ptr<Model> load(const std::string& path, const plan::Placement* p, const char* mode) {
  ForcedPromptExperts forced(mode);
  return vk::load_gpu_model(path, vk::test::shared_test_device(), p);
}

// Layer 0's experts all in RAM, and every other layer's odd experts: whole layers and single
// experts, with a layer ahead to stage.
plan::Placement experts_in_ram(const ModelHParams& hp) {
  plan::Placement p = all_on_gpu(hp);
  p.embeddings_device = 0;
  for (size_t l = 0; l < p.layers.size(); ++l) {
    auto& experts = p.layers[l].expert_device;
    for (size_t e = 0; e < experts.size(); ++e)
      if (l == 0 || e % 2 == 1) experts[e] = 0;
  }
  return p;
}

// What the placement keeps in RAM, as RamExperts lays it out: per layer, each of the gate, up and
// down stacks' RAM experts back to back (aligned), from the file's own tensor sizes.
uint64_t ram_expert_bytes(const Model& model, const plan::Placement& p) {
  const ModelHParams& hp = model.hparams();
  uint64_t total = 0;
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    int64_t in_ram = 0;
    for (int d : p.layers[static_cast<size_t>(il)].expert_device) in_ram += d == 0;
    if (in_ram == 0) continue;
    for (const char* t : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}) {
      const GgufTensorInfo* info = model.file().find_tensor(fmt::format("blk.{}.{}.weight", il, t));
      total += vk::aligned_bytes(info->bytes / static_cast<uint64_t>(hp.n_expert) *
                                 static_cast<uint64_t>(in_ram));
    }
  }
  return total;
}

uint64_t pinned_bytes(const Model& model) {
  uint64_t total = 0;
  for (const Model::DeviceMemory& d : model.device_memory()) total += d.pinned_bytes;
  return total;
}

std::vector<float> prompt_logits(Model& model, const std::vector<int32_t>& prompt) {
  ThreadPool pool(2);
  Session session(model, 256, GgmlType::F16, pool);
  std::vector<float> logits;
  session.eval(prompt, /*all_logits=*/true, logits);
  return logits;
}

const std::vector<std::string>& models() {
  static const std::vector<std::string> m = {
      (oracle_dir() / "models" / "tiny-qwen3moe-Q4_K_M.gguf").string(),
      (oracle_dir() / "models" / "tiny-qwen3moe-F16.gguf").string(),
      (oracle_dir() / "gdn" / "models" / "tiny-qwen35moe-Q8_0.gguf").string()};
  return m;
}

TEST(GpuPromptUploads, PromptBatchHasTheWholeGpuBits) {
  for (const std::string& path : models()) {
    SCOPED_TRACE(path);
    const ModelHParams hp = Model::load(path, LoadMode::mmap)->hparams();
    const plan::Placement split = experts_in_ram(hp);
    const std::vector<int32_t> prompt = prompt_of(4, 40);
    auto whole = load(path, nullptr, "gpu");
    auto uploads = load(path, &split, "gpu");
    // The RAM experts are held once, in host-visible memory the GPU copies from.
    EXPECT_EQ(pinned_bytes(*whole), 0u);
    EXPECT_EQ(pinned_bytes(*uploads), ram_expert_bytes(*uploads, split));
    const std::vector<float> expected = prompt_logits(*whole, prompt);
    EXPECT_EQ(prompt_logits(*uploads, prompt), expected) << "uploaded experts change the bits";
    // Every layer with RAM experts uploaded them, none handed pairs to the CPU.
    const vk::HybridTimeline& t = *vk::hybrid_timeline(*uploads);
    EXPECT_TRUE(t.layers.empty());
    ASSERT_EQ(static_cast<int64_t>(t.uploads.size()), hp.n_layer);
    for (size_t l = 0; l < t.uploads.size(); ++l) {
      const vk::ExpertUploadSpan& u = t.uploads[l];
      EXPECT_EQ(u.layer, static_cast<int64_t>(l));
      EXPECT_EQ(u.experts, l == 0 ? hp.n_expert : hp.n_expert / 2);
      EXPECT_GT(u.bytes, 0u);
      // Each copy after the first starts while the previous layer computes.
      EXPECT_EQ(u.prefetched, l > 0) << "layer " << l;
    }
    // The same split across two logical devices (each stage stages its own layers): the same
    // bits again.
    {
      plan::Placement two = split;
      for (size_t l = static_cast<size_t>(hp.n_layer / 2); l < two.layers.size(); ++l) {
        two.layers[l].attention_device = 2;
        for (int& d : two.layers[l].expert_device) d = d == 0 ? 0 : 2;
      }
      two.output_device = 2;
      ForcedPromptExperts forced("gpu");
      auto split_two = vk::load_gpu_model(
          path, {vk::test::shared_test_device(), vk::test::second_test_device()}, &two);
      EXPECT_EQ(prompt_logits(*split_two, prompt), expected) << "two devices with uploads";
      EXPECT_EQ(pinned_bytes(*split_two), ram_expert_bytes(*split_two, two));
      const vk::HybridTimeline& t2 = *vk::hybrid_timeline(*split_two);
      ASSERT_EQ(static_cast<int64_t>(t2.uploads.size()), hp.n_layer);
      // Each stage's first layer has no previous layer on its device to overlap.
      for (const vk::ExpertUploadSpan& u : t2.uploads)
        EXPECT_EQ(u.prefetched, u.layer != 0 && u.layer != hp.n_layer / 2) << u.layer;
    }
    // The CPU path for the same batch: close, not bit-equal (its partial sum is added apart).
    auto on_cpu = load(path, &split, "cpu");
    const std::vector<float> cpu = prompt_logits(*on_cpu, prompt);
    EXPECT_LT(nmse(cpu.data(), expected.data(), expected.size()), 1e-4);
    EXPECT_FALSE(vk::hybrid_timeline(*on_cpu)->layers.empty());
    EXPECT_TRUE(vk::hybrid_timeline(*on_cpu)->uploads.empty());
  }
}

// Decode steps after an uploaded prompt hand their RAM experts to the CPU; greedy tokens equal
// the CPU path's on F16 weights.
TEST(GpuPromptUploads, DecodeStepsStillUseTheCpuAndTokensMatch) {
  const std::string path = (oracle_dir() / "models" / "tiny-qwen3moe-F16.gguf").string();
  auto cpu = Model::load(path);
  const plan::Placement split = experts_in_ram(cpu->hparams());
  auto gpu = load(path, &split, "gpu");
  ThreadPool pool(2);
  const std::vector<int32_t> prompt = prompt_of(9, 30);
  EXPECT_EQ(session_greedy(*gpu, prompt, 16, pool), session_greedy(*cpu, prompt, 16, pool));
  const vk::HybridTimeline& t = *vk::hybrid_timeline(*gpu);  // the last decode step
  EXPECT_TRUE(t.uploads.empty());
  EXPECT_FALSE(t.layers.empty());
}

// The scheduler's mixed batches (prompt chunks next to decode tokens) with uploads generate what
// each prompt generates alone.
TEST(GpuPromptUploads, BatchedGenerationsMatchSingleSequences) {
  for (const std::string& path : {models()[0], models()[2]}) {
    SCOPED_TRACE(path);
    const plan::Placement split = experts_in_ram(Model::load(path, LoadMode::mmap)->hparams());
    auto model = load(path, &split, "gpu");
    ThreadPool pool(2);
    expect_batched_generations_match_sessions(*model, pool);
  }
}

// A GPU the plan filled has no room for the uploaded stack: the batch falls back to the CPU path
// (its bits) instead of failing, and so do later batches.
TEST(GpuPromptUploads, NoRoomForTheUploadFallsBackToTheCpu) {
  const std::string path = models()[0];
  const plan::Placement split = experts_in_ram(Model::load(path, LoadMode::mmap)->hparams());
  const std::vector<int32_t> prompt = prompt_of(4, 40);
  const auto info = vk::test::shared_test_device()->info();
  auto roomy = std::make_shared<vk::Device>(info);
  std::vector<float> on_cpu;
  uint64_t without_staging = 0;  // the plan and a prompt's buffers, no uploaded stack
  {
    ForcedPromptExperts forced("cpu");
    auto model = vk::load_gpu_model(path, roomy, &split);
    on_cpu = prompt_logits(*model, prompt);
    without_staging = roomy->device_local_bytes();
  }
  auto tight = std::make_shared<vk::Device>(info);
  tight->set_memory_limit(without_staging + (uint64_t{64} << 10));  // far less than a layer's
  ForcedPromptExperts forced("gpu");
  auto model = vk::load_gpu_model(path, tight, &split);
  EXPECT_EQ(prompt_logits(*model, prompt), on_cpu);
  EXPECT_TRUE(vk::hybrid_timeline(*model)->uploads.empty());
  EXPECT_FALSE(vk::hybrid_timeline(*model)->layers.empty());
}

// STRATA_PINNED_EXPERTS=off keeps the RAM experts in the model file's pages: nothing pinned,
// prompt batches compute them on the CPU even when uploads are asked for, and decode reads
// them from the file's stacks (expert ids unmapped) with the same tokens as the CPU.
TEST(GpuPromptUploads, UnpinnedExpertsStayOnTheCpu) {
  const std::string path = (oracle_dir() / "models" / "tiny-qwen3moe-F16.gguf").string();
  auto cpu = Model::load(path);
  const plan::Placement split = experts_in_ram(cpu->hparams());
  std::unique_ptr<Model> unpinned;
  {
    ScopedEnv off("STRATA_PINNED_EXPERTS", "off");
    unpinned = load(path, &split, "gpu");
  }
  EXPECT_EQ(pinned_bytes(*unpinned), 0u);
  const std::vector<int32_t> prompt = prompt_of(4, 40);
  auto pinned = load(path, &split, "cpu");
  EXPECT_EQ(prompt_logits(*unpinned, prompt), prompt_logits(*pinned, prompt));
  EXPECT_TRUE(vk::hybrid_timeline(*unpinned)->uploads.empty());
  EXPECT_EQ(static_cast<int64_t>(vk::hybrid_timeline(*unpinned)->layers.size()),
            cpu->hparams().n_layer);
  ThreadPool pool(2);
  const std::vector<int32_t> decode_prompt = prompt_of(9, 30);
  EXPECT_EQ(session_greedy(*unpinned, decode_prompt, 12, pool),
            session_greedy(*cpu, decode_prompt, 12, pool));
}

TEST(GpuPromptUploads, BadPinnedModeIsAClearError) {
  ScopedEnv bad("STRATA_PINNED_EXPERTS", "maybe");
  const plan::Placement split = experts_in_ram(Model::load(models()[0], LoadMode::mmap)->hparams());
  try {
    vk::load_gpu_model(models()[0], vk::test::shared_test_device(), &split);
    FAIL() << "accepted STRATA_PINNED_EXPERTS=maybe";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected on or off"), std::string::npos) << e.what();
  }
}

TEST(GpuPromptUploads, BadModeIsAClearError) {
  ForcedPromptExperts forced("sometimes");
  const plan::Placement split = experts_in_ram(Model::load(models()[0], LoadMode::mmap)->hparams());
  try {
    vk::load_gpu_model(models()[0], vk::test::shared_test_device(), &split);
    FAIL() << "accepted STRATA_PROMPT_EXPERTS=sometimes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected gpu, cpu or auto"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace strata::test
