// `strata plan` end to end: a tiny oracle model on hypothetical hardware and on lavapipe probed
// through Vulkan, JSON and errors.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_test_support.h"
#include "support/test_support.h"

namespace strata {
namespace {

// The GPU probe through Vulkan on lavapipe (named: auto never takes a CPU-type device): its
// memory and budget become the plan's GPU, both bandwidths are measured once and then read from
// the cache with their date and driver.
TEST(PlanCommand, ProbesGpusThroughVulkanAndCachesTheirBandwidth) {
  SKIP_WITHOUT_GPU_BACKEND();
  const std::string env = lavapipe_only();
  const std::string model = (test::oracle_dir() / "models" / "tiny-qwen3moe-Q4_K_M.gguf").string();
  const auto cache = test::temp_dir() / "vulkan-probe-cache";
  std::filesystem::remove_all(cache);
  const std::string with_cache = env + "XDG_CACHE_HOME=" + cache.string() + " ";
  // (Hypothetical RAM and cores: no CPU calibration needed.)
  const std::string plan = "plan -m " + model + " --ram 8G:30 --cores 4 --ctx 4096 ";
  auto r = run_strata_env(with_cache, plan + "--device vk0 --json", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["hardware"]["gpus"].size(), 1u) << j["hardware"].dump();
  const auto gpu = j["hardware"]["gpus"][0];
  EXPECT_TRUE(contains(gpu["name"].get<std::string>(), "llvmpipe")) << gpu;
  EXPECT_GT(gpu["vram_total_bytes"].get<uint64_t>(), 0u);
  EXPECT_LE(gpu["vram_free_bytes"].get<uint64_t>(), gpu["vram_total_bytes"].get<uint64_t>());
  EXPECT_GT(gpu["bandwidth_gbps"].get<double>(), 0.0);
  EXPECT_GT(gpu["pcie_gbps"].get<double>(), 0.0);
  EXPECT_EQ(gpu["bandwidth_source"].get<std::string>().rfind("measured ", 0), 0u) << gpu;
  EXPECT_EQ(j["layers"][0]["attention"], "GPU0");  // the tiny model fits on it

  std::ifstream in(cache / "strata" / "hardware.json");
  const auto stored = nlohmann::json::parse(in);
  ASSERT_TRUE(stored.contains("gpus")) << stored.dump(2);
  ASSERT_EQ(stored["gpus"].size(), 1u);
  const auto& entry = stored["gpus"].begin().value();
  EXPECT_TRUE(contains(stored["gpus"].begin().key(), "llvmpipe")) << stored["gpus"].dump();
  for (const char* key : {"date", "driver", "driver_version"}) EXPECT_TRUE(entry.contains(key));
  EXPECT_DOUBLE_EQ(entry["read_gbps"].get<double>(), gpu["bandwidth_gbps"].get<double>());

  r = run_strata_env(with_cache, plan + "--device vk0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "GPU0: llvmpipe")) << r.output;
  EXPECT_TRUE(contains(r.output, "(cached, measured ")) << r.output;
  EXPECT_FALSE(contains(r.output, "measuring the read and upload bandwidth")) << r.output;

  // auto leaves lavapipe out; --gpu none and an unknown device likewise.
  for (const std::string args : {"", "--gpu none "}) {
    r = run_strata_env(with_cache, plan + args + "--json", false);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(nlohmann::json::parse(r.output)["hardware"]["gpus"].size(), 0u) << args;
  }
  r = run_strata_env(with_cache, plan + "--device vk9");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--device vk9")) << r.output;

  // --vram-budget: the probed GPU planned as a smaller card (its measured bandwidth kept), as
  // run/bench --vram-budget execute it; experts move to RAM.
  r = run_strata_env(with_cache, plan + "--device vk0 --vram-budget 3M --json", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  j = nlohmann::json::parse(r.output);
  const auto small = j["hardware"]["gpus"][0];
  EXPECT_EQ(small["vram_free_bytes"].get<uint64_t>(), uint64_t{3} << 20) << small;
  EXPECT_DOUBLE_EQ(small["bandwidth_gbps"].get<double>(), gpu["bandwidth_gbps"].get<double>());
  r = run_strata_env(with_cache, plan + "--gpu none --vram-budget 3M");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "there is no GPU to plan for")) << r.output;
}

TEST(PlanCommand, JsonForTinyModelOnHypotheticalHardware) {
  const std::string model = (test::oracle_dir() / "models" / "tiny-qwen3moe-Q4_K_M.gguf").string();
  const std::string svg = (test::temp_dir() / "ctx.svg").string();
  const auto r = run_strata("plan -m " + model +
                                " --gpu 1G:448 --ram 8G:30 --cores 4 --ctx 4096 --kv-type q8_0 "
                                "--json --svg " +
                                svg,
                            false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["model"]["arch"], "qwen3moe");
  EXPECT_EQ(j["hardware"]["physical_cores"], 4);
  EXPECT_EQ(j["hardware"]["gpus"].size(), 1u);
  EXPECT_TRUE(j["fits"].get<bool>());
  EXPECT_EQ(j["layers"].size(), 2u);
  // A tiny model fits on the GPU whole.
  EXPECT_EQ(j["layers"][0]["attention"], "GPU0");
  EXPECT_EQ(j["layers"][0]["experts"]["GPU0"].size(), 8u);
  EXPECT_GT(j["predicted"]["decode_tok_s"].get<double>(), 0);
  EXPECT_GT(j["predicted"]["prompt_tok_s"].get<double>(), 0);
  EXPECT_EQ(j["context_table"].size(), 5u);
  const std::string flags = j["llama_cpp"]["flags"];
  EXPECT_NE(flags.find("-ngl 99"), std::string::npos) << flags;
  EXPECT_NE(flags.find("-ctk q8_0"), std::string::npos) << flags;
  uint64_t weights = 0;
  for (const auto& d : j["devices"])  // the file's bytes, plus the CPU's packed tiles
    weights += d["weight_bytes"].get<uint64_t>() - d["tile_bytes"].get<uint64_t>();
  EXPECT_EQ(weights, j["model"]["total_bytes"].get<uint64_t>());
  std::ifstream in(svg);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("<svg"), std::string::npos);
  EXPECT_NE(text.find("<polyline"), std::string::npos);
}

TEST(PlanCommand, TextForArchitecturePresetNamesBottleneckAndFlags) {
  const auto r = run_strata(
      "plan --arch qwen3-coder-30b-a3b --quant-size 18.56GB --gpu 7.6G:448 --ram 32G:29.1 "
      "--cores 6 --ctx 36864 --kv-type q8_0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* needle : {"reading experts from RAM at 29 GB/s", "--n-cpu-moe 36",
                             "Context vs speed", "256K", "prompt processing"}) {
    EXPECT_NE(r.output.find(needle), std::string::npos) << needle << "\n" << r.output;
  }
}

// The command a user runs today, pasted as flags, is priced next to strata's plan (text and JSON).
TEST(PlanCommand, GivenLlamaCppFlagsArePricedNextToThePlan) {
  const std::string base =
      "plan --arch qwen3-coder-30b-a3b --quant-size 18.56GB --gpu 7.6G:448 --ram 32G:29.1 "
      "--cores 6 --ctx 36864 --kv-type q8_0";
  auto r = run_strata(base + " --ot 'blk\\.([5-9]|[1-9][0-9])\\.ffn_.*_exps=CPU'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("The given placement: 43 layers with experts in RAM"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("x the given placement"), std::string::npos) << r.output;
  r = run_strata(base + " --n-cpu-moe 36 --json", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["given"]["cpu_expert_layers"], 36);
  EXPECT_TRUE(j["given"]["fits"].get<bool>());
  EXPECT_GE(j["given"]["plan_speedup"].get<double>(), 0.999);
  r = run_strata(base + " --ot 'ffn_.*_exps=TPU'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("unknown device 'TPU'"), std::string::npos) << r.output;
}

// gpt-oss (MXFP4 experts, sliding layers), GLM-4.5-Air (a dense first layer, a NextN block) and
// Qwen3-Next (one KV layer in four) are planned from their published shapes.
TEST(PlanCommand, MoreArchitecturePresetsArePlanned) {
  const auto help = run_strata("plan --help");
  for (const char* name : {"gpt-oss-20b", "gpt-oss-120b", "glm-4.5-air", "qwen3-next-80b-a3b"}) {
    EXPECT_TRUE(contains(help.output, name)) << name << "\n" << help.output;
  }
  struct Case {
    const char* args;
    size_t layers;
    const char* first_kind;
  };
  const Case cases[] = {{"--arch gpt-oss-20b --quant-size 12.1GB", 24, "sliding"},
                        {"--arch gpt-oss-120b --bpw 8.5", 36, "sliding"},
                        {"--arch glm-4.5-air --bpw 4.8", 46, "attention"},
                        {"--arch qwen3-next-80b-a3b --bpw 4.8", 48, "recurrent"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const auto r = run_strata(
        std::string("plan ") + c.args + " --gpu 8G:448 --ram 128G:50 --cores 8 --ctx 8192 --json",
        false);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto j = nlohmann::json::parse(r.output);
    EXPECT_TRUE(j["fits"].get<bool>());
    ASSERT_EQ(j["layers"].size(), c.layers);
    EXPECT_EQ(j["layers"][0]["kind"], c.first_kind);
    EXPECT_GT(j["predicted"]["decode_tok_s"].get<double>(), 0);
  }
  const auto text =
      run_strata("plan --arch gpt-oss-20b --quant-size 12.1GB --gpu 8G:448 --ram 32G:50 --cores 8");
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_TRUE(contains(text.output, "gpt-oss-20b")) << text.output;
  EXPECT_TRUE(contains(text.output, "sliding")) << text.output;
}

TEST(PlanCommand, BadFlagsAreReported) {
  auto r = run_strata("plan --arch qwen3-coder-30b-a3b --quant-size 18.56GB --gpu 8G:fast");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--gpu bandwidth (GB/s)"), std::string::npos) << r.output;
  r = run_strata("plan --arch qwen3-coder-30b-a3b --quant-size 18.56 --gpu none --ram 32G:29");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--quant-size 18.56: give a unit: 18.56GB"), std::string::npos)
      << r.output;
  r = run_strata("plan --arch qwen3-coder-30b-a3b --quant-size 1G --gpu none --ram 32G:29");
  EXPECT_EQ(r.exit_code, 0) << r.output;  // 0.3 bits per weight: planned, with a warning
  EXPECT_NE(r.output.find("bits per weight is no GGUF quantization"), std::string::npos)
      << r.output;
  r = run_strata("plan --arch qwen3-coder-30b-a3b --quant-size 18.56GB --gpu 'RTX 9999'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("no GPU of that name in strata's table"), std::string::npos) << r.output;
  r = run_strata("plan --arch nope --quant-size 1GB --ram 32G:29 --gpu none");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("unknown architecture preset 'nope'"), std::string::npos) << r.output;
  r = run_strata(
      "plan --arch qwen3-30b-a3b --quant-size 18GB --ram 32G:29 --gpu none --kv-type q5");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("expected f16, q8_0 or q4_0"), std::string::npos) << r.output;
}

// A hypothetical machine without knowing its bandwidths: a GPU by name takes its published
// figures, a size alone a typical card's, RAM a size alone dual-channel DDR4; each assumption is
// said in the plan.
TEST(PlanCommand, HypotheticalMachinesByNameOrSizeAlone) {
  const std::string base = "plan --arch qwen3-coder-30b-a3b --quant-size 18.56GB --cores 6 ";
  auto r = run_strata(base + "--gpu 'RTX 3060' --ram 32G --json", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  const auto& gpu = j["hardware"]["gpus"][0];
  EXPECT_DOUBLE_EQ(gpu["bandwidth_gbps"].get<double>(), 360);
  EXPECT_EQ(gpu["vram_total_bytes"].get<uint64_t>(), uint64_t{12} << 30);
  EXPECT_TRUE(contains(gpu["bandwidth_source"].get<std::string>(), "published for the RTX 3060"));
  EXPECT_DOUBLE_EQ(j["hardware"]["ram_bandwidth_gbps"].get<double>(), 35.8);
  EXPECT_TRUE(contains(j["hardware"]["ram_bandwidth_source"].get<std::string>(),
                       "assumed: dual-channel DDR4-3200"));
  r = run_strata(base + "--gpu 'geforce rtx 4060 ti:16G' --gpu 8G --ram 32G:29.1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "RTX 4060 Ti (16 GiB)")) << r.output;
  EXPECT_TRUE(contains(r.output, "assumed: an RTX 2070-class card")) << r.output;
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// Issue 40: `strata bench` records its run; `strata plan` for the same model and settings then
// predicts what the bench measured (corrected by the record) and says what it learned.
TEST(PlanCommand, PredictsWhatTheRecordedBenchMeasured) {
  const std::string model = (test::oracle_dir() / "models" / "tiny-qwen3moe-Q8_0.gguf").string();
  const auto cache = test::temp_dir() / "learned-cache";
  const std::string env = fresh_cache_env(cache);
  const auto bench = run_strata_env(
      env, "bench -m " + model + " --device none -t 2 -p 64 -n 32 -r 2 --no-bandwidth --json",
      false);
  ASSERT_EQ(bench.exit_code, 0) << bench.output;
  const double tg = nlohmann::json::parse(bench.output)["tg"]["tok_per_s"].get<double>();
  const auto plan =
      run_strata_env(env, "plan -m " + model + " --device none -t 2 --ctx 96 --json", false);
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  const auto j = nlohmann::json::parse(plan.output);
  const auto& learned = j["hardware"]["cpu_calibration"]["learned"];
  ASSERT_EQ(learned["runs"], 1) << plan.output;
  EXPECT_NEAR(j["predicted"]["decode_tok_s"].get<double>() / tg, 1.0, 0.1) << plan.output;
  const auto text = run_strata_env(env, "plan -m " + model + " --device none -t 2 --ctx 96");
  EXPECT_TRUE(contains(text.output, "learned from 1 recorded run(s) on this machine"))
      << text.output;
}

}  // namespace
}  // namespace strata
