// `strata plan` end to end: a tiny oracle model on hypothetical hardware, JSON and errors.

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_test_support.h"
#include "support/test_support.h"

namespace strata {
namespace {

// The GPU probe through a made-up CUDA driver (tests/support/fake_cuda_driver.cpp): what the
// driver reports becomes the plan's GPU, and a device without a known bandwidth is left out.
TEST(PlanCommand, ProbesGpusThroughTheCudaDriverApi) {
  const std::string model = (test::oracle_dir() / "models" / "tiny-qwen3moe-Q4_K_M.gguf").string();
  const std::string env = std::string("LD_LIBRARY_PATH=") + FAKE_CUDA_DIR + " ";
  // (Hypothetical RAM and cores: no CPU calibration needed.)
  auto r =
      run_strata_env(env, "plan -m " + model + " --ram 8G:30 --cores 4 --ctx 4096 --json", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["hardware"]["gpus"].size(), 1u) << j["hardware"].dump();
  const auto& gpu = j["hardware"]["gpus"][0];
  EXPECT_EQ(gpu["name"], "Fake GeForce RTX 2070 SUPER");
  EXPECT_EQ(gpu["vram_total_bytes"], uint64_t{8} << 30);
  EXPECT_EQ(gpu["vram_free_bytes"], (uint64_t{15} << 30) / 2);
  EXPECT_NEAR(gpu["bandwidth_gbps"].get<double>(), 448.064, 1e-9);  // 2 x 7001 MHz x 256 bits
  EXPECT_EQ(gpu["pcie_gbps"], 16);  // no sysfs entry for the bus: the assumed PCIe 3.0 x16
  EXPECT_EQ(j["layers"][0]["attention"], "GPU0");  // the tiny model fits on it

  r = run_strata_env(env, "plan -m " + model + " --ram 8G:30 --cores 4 --ctx 4096");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("GPU0: Fake GeForce RTX 2070 SUPER, 8.00 GiB (7.50 GiB free), 448 GB/s"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("GPU 1 (Fake GPU without clocks): the driver does not report"),
            std::string::npos)
      << r.output;
  // --gpu none ignores the driver.
  r = run_strata_env(env, "plan -m " + model + " --gpu none --ram 8G:30 --cores 4 --json", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["hardware"]["gpus"].size(), 0u);
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
  for (const auto& d : j["devices"]) weights += d["weight_bytes"].get<uint64_t>();
  EXPECT_EQ(weights, j["model"]["total_bytes"].get<uint64_t>());
  std::ifstream in(svg);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("<svg"), std::string::npos);
  EXPECT_NE(text.find("<polyline"), std::string::npos);
}

TEST(PlanCommand, TextForArchitecturePresetNamesBottleneckAndFlags) {
  const auto r = run_strata(
      "plan --arch qwen3-coder-30b-a3b --quant-size 18.56G --gpu 7.6G:448 --ram 32G:29.1 "
      "--cores 6 --ctx 36864 --kv-type q8_0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* needle : {"reading experts from RAM at 29 GB/s", "--n-cpu-moe 36",
                             "Context vs speed", "256K", "prompt processing"}) {
    EXPECT_NE(r.output.find(needle), std::string::npos) << needle << "\n" << r.output;
  }
}

TEST(PlanCommand, BadFlagsAreReported) {
  auto r = run_strata("plan --arch qwen3-coder-30b-a3b --quant-size 18.56G --gpu 8G --ram 32G:29");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("expected VRAM:BANDWIDTH"), std::string::npos) << r.output;
  r = run_strata("plan --arch nope --quant-size 1G --ram 32G:29 --gpu none");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("unknown architecture preset 'nope'"), std::string::npos) << r.output;
  r = run_strata("plan --arch qwen3-30b-a3b --quant-size 18G --ram 32G:29 --gpu none --kv-type q5");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("expected f16, q8_0 or q4_0"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace strata
