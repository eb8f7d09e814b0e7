// `strata inspect` end to end: the real binary on oracle files, text and JSON.

#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_test_support.h"
#include "support/test_support.h"

namespace strata {
namespace {

std::string model(const std::string& name) {
  return (test::oracle_dir() / "models" / name).string();
}

TEST(InspectCommand, TextShowsHyperParametersRolesAndTensors) {
  const auto r = run_strata("inspect " + model("tiny-qwen3moe-Q4_K_M.gguf"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* needle :
       {"architecture: qwen3moe", "experts used per token:    2", "Bytes by role", "routed experts",
        "Bytes by type", "Q6_K", "blk.1.ffn_down_exps.weight", "[256, 256, 8]", "Metadata",
        "general.file_type"}) {
    EXPECT_NE(r.output.find(needle), std::string::npos) << needle << "\n" << r.output;
  }
}

TEST(InspectCommand, JsonTotalsAddUp) {
  const auto r = run_strata("inspect --json " + model("tiny-qwen3moe-Q8_0.gguf"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["architecture"], "qwen3moe");
  EXPECT_EQ(j["hyper_parameters"]["expert_count"], 8);
  uint64_t sum = 0, experts = 0;
  for (const auto& t : j["tensors"]) {
    sum += t["bytes"].get<uint64_t>();
    if (t["role"] == "routed experts") experts += t["bytes"].get<uint64_t>();
  }
  EXPECT_EQ(sum, j["tensor_bytes"].get<uint64_t>());
  EXPECT_EQ(experts, j["by_role"]["routed experts"]["bytes"].get<uint64_t>());
  // 2 layers x 3 expert tensors x 8 experts x 256 x 256 Q8_0 (34 bytes per 32).
  EXPECT_EQ(experts, 2u * 3 * 8 * 256 * 256 / 32 * 34);
  double percent = 0;
  for (const auto& [role, total] : j["by_role"].items()) percent += total["percent"].get<double>();
  EXPECT_NEAR(percent, 100.0, 1e-6);
  for (const auto& t : j["tensors"]) {
    const std::string name = t["name"];
    if (name.rfind("blk.1.", 0) == 0) {
      EXPECT_EQ(t["layer"], 1) << name;
    } else if (name.rfind("blk.", 0) != 0) {
      EXPECT_FALSE(t.contains("layer")) << name;
    }
  }
}

TEST(InspectCommand, LongArraysSummarizedInJson) {
  const auto r = run_strata("inspect --json --max-array 4 " +
                            (test::oracle_dir() / "tokenizer" / "qwen3-vocab.gguf").string());
  ASSERT_EQ(r.exit_code, 0) << r.output.substr(0, 2000);
  const auto j = nlohmann::json::parse(r.output);
  const auto& tokens = j["metadata"]["tokenizer.ggml.tokens"];
  EXPECT_EQ(tokens["length"], 151669);
  EXPECT_EQ(tokens["first"].size(), 4u);
}

TEST(InspectCommand, BadInputGivesClearErrorAndNonZeroExit) {
  auto r = run_strata("inspect /nonexistent/model.gguf");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("cannot open '/nonexistent/model.gguf'"), std::string::npos) << r.output;

  const auto truncated = (test::temp_dir() / "truncated.gguf").string();
  {
    FILE* in = std::fopen(model("tiny-llama-Q8_0.gguf").c_str(), "rb");
    FILE* out = std::fopen(truncated.c_str(), "wb");
    ASSERT_TRUE(in && out);
    char buffer[100000];
    const size_t n = std::fread(buffer, 1, sizeof buffer, in);
    std::fwrite(buffer, 1, n, out);
    std::fclose(in);
    std::fclose(out);
  }
  r = run_strata("inspect " + truncated);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("runs past the end"), std::string::npos) << r.output;
  r = run_strata("inspect");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--model is required"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace strata
