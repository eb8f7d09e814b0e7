// `--device` on run / logits / bench end to end: the whole model on lavapipe (named vk0, as only
// named CPU-type devices are used), the same tokens and logits as the oracle, and a clear error
// (or, for `auto`, the CPU) when the device is missing or there is no Vulkan at all.

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_test_support.h"
#include "runtime/logits_file.h"
#include "support/test_support.h"

namespace strata {
namespace {

std::string model_path(const std::string& name) {
  return (test::oracle_dir() / "models" / (name + ".gguf")).string();
}

TEST(DeviceOption, RunOnTheGpuGivesTheReferenceTokens) {
  SKIP_WITHOUT_GPU_BACKEND();
  const std::string m = "tiny-qwen3moe-F16";
  const auto ref = LogitsFile::read((test::oracle_dir() / "logits" / (m + ".f16kv.orcl")).string());
  const auto r = run_strata_env(lavapipe_only(),
                                "run -m " + model_path(m) + " --device vk0 --tokens " +
                                    join(ref.prompt) + " -n " + std::to_string(ref.gen.size()),
                                false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, join(ref.gen) + "\n");
}

// The prompt's rows (free-running greedy tokens after a near-tie could take another path).
TEST(DeviceOption, LogitsOnTheGpuMatchTheReference) {
  SKIP_WITHOUT_GPU_BACKEND();
  const std::string m = "tiny-qwen3moe-Q8_0";
  const auto ref = LogitsFile::read((test::oracle_dir() / "logits" / (m + ".f16kv.orcl")).string());
  const auto out = (test::temp_dir() / "gpu.orcl").string();
  const auto r =
      run_strata_env(lavapipe_only(), "logits -m " + model_path(m) + " --device vk0 --tokens " +
                                          join(ref.prompt) + " -n 1 -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "on vk0 (")) << r.output;  // the log names the device
  const auto ours = LogitsFile::read(out);
  const size_t n = ref.prompt.size() * ref.n_vocab;
  ASSERT_EQ(ours.logits.size(), n);
  EXPECT_EQ(ours.gen, std::vector<int32_t>{ref.gen[0]});
  // The oracle test's threshold for quantized files (tests/model/gpu).
  EXPECT_LT(test::nmse(ours.logits.data(), ref.logits.data(), n), 2e-3);
}

TEST(DeviceOption, BenchReportsTheDeviceAndItsBandwidth) {
  SKIP_WITHOUT_GPU_BACKEND();
  const auto r = run_strata_env(
      lavapipe_only(),
      "bench -m " + model_path("tiny-qwen3moe-Q4_K_M") + " --device vk0 -p 16 -n 4 -r 1 --json",
      false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_TRUE(contains(j["device"].get<std::string>(), "vk0 (llvmpipe")) << j["device"];
  EXPECT_GT(j["gpu_read_gbps"].get<double>(), 0.0);
  EXPECT_GT(j["gpu_upload_gbps"].get<double>(), 0.0);
  EXPECT_FALSE(j.contains("ram_read_gbps"));
  EXPECT_GT(j["roofline_fraction"].get<double>(), 0.0);
  EXPECT_GT(j["pp"]["tok_per_s"].get<double>(), 0.0);
  EXPECT_GT(j["tg"]["tok_per_s"].get<double>(), 0.0);
  const auto text = run_strata_env(
      lavapipe_only(),
      "bench -m " + model_path("tiny-qwen3moe-Q4_K_M") + " --device vk0 -p 16 -n 4 -r 1", false);
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_TRUE(contains(text.output, "setup      vk0 (llvmpipe")) << text.output;
  EXPECT_TRUE(contains(text.output, "GPU read ")) << text.output;
  EXPECT_TRUE(contains(text.output, "roofline ")) << text.output;
}

TEST(DeviceOption, MissingDevicesAreClearErrorsAndAutoFallsBackToTheCpu) {
  SKIP_WITHOUT_GPU_BACKEND();
  const std::string run = "run -m " + model_path("tiny-qwen3-Q8_0") + " --tokens 1,2,3 -n 2";
  auto r = run_strata_env(lavapipe_only(), run + " --device vk7");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--device vk7")) << r.output;
  r = run_strata_env(lavapipe_only(), run + " --device gpu0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "gpu0")) << r.output;
  // No Vulkan loader: asking for a GPU is an error naming the loader; auto and none use the CPU.
  const std::string no_loader = "STRATA_VULKAN_LOADER=/nonexistent/libvulkan.so.1 ";
  r = run_strata_env(no_loader, run + " --device vk0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "Vulkan loader")) << r.output;
  const auto cpu = run_strata(run + " --device none", false);
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  for (const std::string& env : {no_loader, lavapipe_only()}) {
    r = run_strata_env(env, run + " --device auto", false);
    EXPECT_EQ(r.exit_code, 0) << env << r.output;
    EXPECT_EQ(r.output, cpu.output) << env;  // lavapipe is never picked by auto
  }
}

// What the CPU generates, greedy.
std::string cpu_tokens(const std::string& model, const std::string& prompt, int n) {
  const auto r = run_strata(
      "run -m " + model + " --device none --tokens " + prompt + " -n " + std::to_string(n), false);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.output;
}

// --vram-budget caps what strata takes of the device: a budget that holds no layer runs the
// planner's plan, every part on the CPU, with a warning (not a refusal); a placement the user
// forces whose weights or buffers do not fit is refused with the numbers.
TEST(DeviceOption, VramBudgetTooSmallRunsOnTheCpuOrIsAClearError) {
  SKIP_WITHOUT_GPU_BACKEND();
  const std::string model = model_path("tiny-qwen3moe-Q8_0");
  const std::string run = "run -m " + model + " --tokens 1,2,3 -n 2";
  auto r = run_strata_env(lavapipe_only(), run + " --device vk0 --vram-budget 256K");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "256.00 KiB of GPU memory holds no layer of it")) << r.output;
  EXPECT_TRUE(contains(r.output, "running on the CPU")) << r.output;
  EXPECT_TRUE(contains(r.output, cpu_tokens(model, "1,2,3", 2))) << r.output;
  r = run_strata_env(lavapipe_only(), run + " --device vk0 --n-cpu-moe 0 --vram-budget 1M");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "the weights need 3.73 MiB on vk0")) << r.output;
  EXPECT_TRUE(contains(r.output, "only 1.00 MiB of its memory is in the --vram-budget"))
      << r.output;
  // The weights (3.87 MiB) fit, the step's work buffers do not (--n-cpu-moe 0 and token_embd on
  // the GPU: the whole model, so the planner moves nothing to RAM).
  r = run_strata_env(lavapipe_only(), run +
                                          " --device vk0 --n-cpu-moe 0 --ot 'token_embd=GPU0' "
                                          "--vram-budget 3990K");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "out of GPU memory on vk0")) << r.output;
  EXPECT_TRUE(contains(r.output, "needs 6.00 KiB (6144 bytes); strata holds 3.8")) << r.output;
  EXPECT_TRUE(contains(r.output, "(--vram-budget 3.90 MiB)")) << r.output;
  r = run_strata_env(lavapipe_only(), run + " --device vk0 --vram-budget lots");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "lots")) << r.output;
  // auto falls back to the CPU instead (lavapipe is not picked by auto, so name no device:
  // the budget alone changes nothing there).
  r = run_strata_env(lavapipe_only(), run + " --vram-budget 1M", false);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// A 2.3 MiB model under a 4 MiB budget runs whole on the GPU: the plan counts the KV cache this
// run allocates (8 positions), not the default context's (4096: 6 MiB more, "needs more than the
// 6.00 MiB" before), and the step buffers of its size.
TEST(DeviceOption, ASmallModelUnderABudgetThatHoldsItRunsWhole) {
  SKIP_WITHOUT_GPU_BACKEND();
  const std::string model = model_path("tiny-qwen3moe-Q4_K_M");
  const auto r = run_strata_env(lavapipe_only(), "run -m " + model +
                                                     " --device vk0 --vram-budget 4M "
                                                     "--tokens 1,2,3,4 -n 4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "running " + model + " on vk0")) << r.output;
  EXPECT_FALSE(contains(r.output, "needs more than")) << r.output;
  EXPECT_TRUE(contains(r.output, cpu_tokens(model, "1,2,3,4", 4))) << r.output;
}

// ---- hybrid plans: routed experts in RAM, computed by the CPU during the GPU's step ----

// A budget that holds only the first layer's attention: the planner keeps the output head with
// the last layer (on the CPU), so its own plan runs, with the CPU's tokens. (It used to put the
// head on the GPU of the last GPU layer, which the executor refused.)
TEST(DeviceOption, APlanWithOnlyTheFirstLayerOnTheGpuRuns) {
  SKIP_WITHOUT_GPU_BACKEND();
  const std::string model = model_path("tiny-qwen3moe-F16");
  const std::string run = "run -m " + model + " --tokens 1,2,3,4,5,6,7,8 -n 8";
  const auto r = run_strata_env(lavapipe_only(), run + " --device vk0 --vram-budget 2M");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "layer 0 on vk0")) << r.output;
  EXPECT_TRUE(contains(r.output, "output head on the CPU")) << r.output;
  EXPECT_TRUE(contains(r.output, cpu_tokens(model, "1,2,3,4,5,6,7,8", 8))) << r.output;
}

// llama.cpp's --n-cpu-moe / --cpu-moe / -ot: the experts of the first layer (or all) in RAM give
// the reference tokens on the F16 model, and the log prints the plan being executed.
TEST(HybridPlan, NCpuMoeAndCpuMoeGiveTheReferenceTokens) {
  SKIP_WITHOUT_GPU_BACKEND();
  const std::string m = "tiny-qwen3moe-F16";
  const auto ref = LogitsFile::read((test::oracle_dir() / "logits" / (m + ".f16kv.orcl")).string());
  for (const char* flag : {"--n-cpu-moe 1", "--cpu-moe", "--ot 'blk\\.0\\.ffn_.*_exps=CPU'"}) {
    const std::string run = "run -m " + model_path(m) + " --device vk0 " + flag + " --tokens " +
                            join(ref.prompt) + " -n " + std::to_string(ref.gen.size());
    const auto r = run_strata_env(lavapipe_only(), run, false);
    ASSERT_EQ(r.exit_code, 0) << flag << ": " << r.output;
    EXPECT_EQ(r.output, join(ref.gen) + "\n") << flag;
    const auto logged = run_strata_env(lavapipe_only(), run);
    EXPECT_TRUE(contains(logged.output,
                         "plan: attention, routers and shared experts of all 2 "
                         "layers on vk0"))
        << logged.output;
    // The file's experts: 3 x 1.00 MiB (F16 [256, 256, 8]) per layer, 384 KiB per expert.
    EXPECT_TRUE(contains(logged.output, std::string(flag) == "--cpu-moe"
                                            ? "16 experts (6.00 MiB) in RAM"
                                            : "8 experts (3.00 MiB) in RAM"))
        << logged.output;
  }
}

// A --vram-budget the whole model does not fit in: the planner keeps experts in RAM and the run
// gives the CPU's tokens.
TEST(HybridPlan, VramBudgetBelowTheModelRunsAPlanWithExpertsInRam) {
  SKIP_WITHOUT_GPU_BACKEND();
  const std::string model = model_path("tiny-qwen3moe-Q8_0");
  const auto r = run_strata_env(lavapipe_only(), "run -m " + model +
                                                     " --device vk0 --vram-budget 3990K --ctx 256 "
                                                     "--tokens 1,2,3,4,5 -n 8");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "needs more than the 3.90 MiB of GPU memory")) << r.output;
  EXPECT_TRUE(contains(r.output, "in RAM computed by the CPU")) << r.output;
  const auto quiet = run_strata_env(
      lavapipe_only(),
      "run -m " + model + " --device vk0 --vram-budget 3990K --ctx 256 --tokens 1,2,3,4,5 -n 8",
      false);
  EXPECT_EQ(quiet.output, cpu_tokens(model, "1,2,3,4,5", 8));
}

// --gpu-layers N below the layer count (llama.cpp's -ngl): the first layers and the output head
// run on the CPU, the last N on the GPU; the reference tokens, and the log says where.
TEST(HybridPlan, GpuLayersBelowTheLayerCountRunTheRestOnTheCpu) {
  SKIP_WITHOUT_GPU_BACKEND();
  const std::string m = "tiny-qwen3moe-F16";
  const auto ref = LogitsFile::read((test::oracle_dir() / "logits" / (m + ".f16kv.orcl")).string());
  const std::string run = "run -m " + model_path(m) + " --device vk0 --gpu-layers 1 --tokens " +
                          join(ref.prompt) + " -n " + std::to_string(ref.gen.size());
  const auto r = run_strata_env(lavapipe_only(), run, false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, join(ref.gen) + "\n");
  const auto logged = run_strata_env(lavapipe_only(), run);
  EXPECT_TRUE(contains(logged.output, "layer 0 on the CPU, layer 1 on vk0")) << logged.output;
  EXPECT_TRUE(contains(logged.output, "output head on the CPU")) << logged.output;
}

// --device vk0,vk0 opens the GPU twice, as two logical devices, and splits the layers across
// them (with --n-cpu-moe, experts in RAM as well): the CPU's tokens, both devices in the log.
TEST(HybridPlan, TwoDevicesSplitTheLayers) {
  SKIP_WITHOUT_GPU_BACKEND();
  const std::string model =
      (test::oracle_dir() / "gdn" / "models" / "tiny-qwen35moe-Q8_0.gguf").string();
  for (const char* flags : {"", " --n-cpu-moe 2"}) {
    const std::string run =
        "run -m " + model + " --device vk0,vk0" + flags + " --tokens 1,2,3,4,5 -n 8";
    const auto r = run_strata_env(lavapipe_only(), run, false);
    ASSERT_EQ(r.exit_code, 0) << flags << ": " << r.output;
    EXPECT_EQ(r.output, cpu_tokens(model, "1,2,3,4,5", 8)) << flags;
    const auto logged = run_strata_env(lavapipe_only(), run);
    EXPECT_TRUE(contains(logged.output, "on vk0 (")) << logged.output;
    EXPECT_TRUE(contains(logged.output, "on vk0:1 (")) << logged.output;
  }
}

// `strata plan --json` for a small hypothetical GPU (its 800 MiB runtime margin plus ~3.7 MiB),
// executed with --plan.
TEST(HybridPlan, SavedPlanRunsAsPlanned) {
  SKIP_WITHOUT_GPU_BACKEND();
  const std::string model = model_path("tiny-qwen3moe-Q8_0");
  const auto plan = run_strata(
      "plan -m " + model + " --gpu 823000K:448 --ram 16G:20 --cores 2 --ctx 256 --json", false);
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  const auto j = nlohmann::json::parse(plan.output);
  int in_ram = 0;
  for (const auto& l : j["layers"])
    if (l["experts"].contains("CPU")) in_ram += static_cast<int>(l["experts"]["CPU"].size());
  ASSERT_GT(in_ram, 0) << "the plan should keep experts in RAM: " << plan.output;
  const std::string file = (test::temp_dir() / "plan.json").string();
  std::ofstream(file) << plan.output;
  const auto r = run_strata_env(
      lavapipe_only(),
      "run -m " + model + " --device vk0 --plan " + file + " --tokens 1,2,3,4,5 -n 8", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, cpu_tokens(model, "1,2,3,4,5", 8));
  const auto logged = run_strata_env(
      lavapipe_only(), "run -m " + model + " --device vk0 --plan " + file + " --tokens 1,2 -n 1");
  EXPECT_TRUE(contains(logged.output, fmt::format("{} experts", in_ram))) << logged.output;
}

// bench --profile under a hybrid plan and a --vram-budget the model fills: the bandwidth probe's
// buffer is not charged to the model's budget, and the step's hand-overs are reported.
TEST(HybridPlan, BenchProfileShowsTheHandOvers) {
  SKIP_WITHOUT_GPU_BACKEND();
  const std::string bench =
      "bench -m " + model_path("tiny-qwen3moe-Q4_K_M") +
      " --device vk0 --vram-budget 4M --n-cpu-moe 1 -p 16 -n 4 -r 1 --profile";
  const auto r = run_strata_env(lavapipe_only(), bench + " --json", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_GT(j["gpu_read_gbps"].get<double>(), 0.0);
  ASSERT_TRUE(j.contains("hybrid_timeline")) << r.output;
  const auto& t = j["hybrid_timeline"];
  ASSERT_EQ(t["layers"].size(), 1u);  // layer 0's experts are in RAM
  EXPECT_EQ(t["layers"][0]["layer"], 0);
  EXPECT_GT(t["layers"][0]["pairs"].get<int>(), 0);
  EXPECT_GT(t["step_ms"].get<double>(), 0.0);
  // The GPU's segments, timed: the hand-over splits the step, and they follow each other.
  ASSERT_GE(t["gpu_segments"].size(), 2u) << r.output;
  double previous_end = 0;
  for (const auto& g : t["gpu_segments"]) {
    EXPECT_GE(g["start_ms"].get<double>(), previous_end - 1e-9);
    EXPECT_GE(g["end_ms"].get<double>(), g["start_ms"].get<double>());
    previous_end = g["end_ms"].get<double>();
  }
  // The prompt batch's path: the CPU (lavapipe has no PCIe to upload over), or, forced, the
  // upload of layer 0's experts.
  ASSERT_TRUE(j.contains("hybrid_prompt_timeline")) << r.output;
  EXPECT_EQ(j["hybrid_prompt_timeline"]["layers"].size(), 1u);
  EXPECT_TRUE(j["hybrid_prompt_timeline"]["uploads"].empty());
  const auto text = run_strata_env(lavapipe_only(), bench, false);
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_TRUE(contains(text.output, "hybrid decode step")) << text.output;
  EXPECT_TRUE(contains(text.output, "GPU busy at CPU start / end")) << text.output;
  EXPECT_TRUE(contains(text.output, "RAM experts of 0 layers uploaded")) << text.output;
  EXPECT_TRUE(contains(text.output, "GPU segments (timestamp queries")) << text.output;
  const auto forced =
      run_strata_env(lavapipe_only() + "STRATA_PROMPT_EXPERTS=gpu ", bench + " --json", false);
  ASSERT_EQ(forced.exit_code, 0) << forced.output;
  const auto forced_json = nlohmann::json::parse(forced.output);
  const auto& uploads = forced_json["hybrid_prompt_timeline"]["uploads"];
  ASSERT_EQ(uploads.size(), 1u) << forced.output;
  EXPECT_EQ(uploads[0]["layer"], 0);
  EXPECT_EQ(uploads[0]["experts"], 8);
  EXPECT_GT(uploads[0]["bytes"].get<uint64_t>(), 0u);
  EXPECT_FALSE(uploads[0]["during_previous_layer"].get<bool>());  // layer 0 has none before it
}

TEST(HybridPlan, BadPlacementFlagsAreClearErrors) {
  SKIP_WITHOUT_GPU_BACKEND();
  const std::string run = "run -m " + model_path("tiny-qwen3moe-Q8_0") + " --tokens 1,2 -n 1";
  auto r = run_strata_env(lavapipe_only(), run + " --device vk0 --gpu-layers 0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--gpu-layers 0 keeps every layer on the CPU")) << r.output;
  r = run_strata_env(lavapipe_only(), run + " --device vk0 --gpu-layers 99", false);
  EXPECT_EQ(r.exit_code, 0) << r.output;  // every layer on the GPU: nothing to move
  r = run_strata_env(lavapipe_only(), run + " --device none --n-cpu-moe 1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "this run has none (--device none)")) << r.output;
  r = run_strata_env(lavapipe_only(), run + " --device vk0 --plan /nonexistent/plan.json");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--plan /nonexistent/plan.json: cannot read the file"))
      << r.output;
  r = run_strata_env(lavapipe_only(), run + " --device vk0 --plan x.json --cpu-moe");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--plan gives the whole placement")) << r.output;
}

}  // namespace
}  // namespace strata
