// The architectures of ../shared/oracle/archs on the Vulkan test device, every file: Mixtral-style
// llama, qwen3next (its fused projections regrouped at load, its grouped key heads a GDN kernel
// option), glm4moe (projection biases, sigmoid routing with the score-correction bias and the
// weight scale in the router kernel) and gpt-oss (MXFP4 experts, biases, attention sinks and
// sliding windows in the attention kernel, YaRN in the rope kernel, per-expert biases and the
// clamped SwiGLU). Held to the CPU test's bounds (arch_oracle_test.cpp) but the first row of
// gpt-oss: the GPU's attention keeps its probabilities in f32 like the CPU, so the sink case
// sits at the CPU's distance from the reference (see there).

#include <gtest/gtest.h>

#include "backend/vulkan/gpu_model.h"
#include "gpu_oracle_cases.h"
#include "model/oracle_compare.h"
#include "support/test_support.h"
#include "unit/vulkan/gpu_test_device.h"

namespace strata::test {
namespace {

class GpuArchOracleLogits : public testing::TestWithParam<ArchCase> {};

TEST_P(GpuArchOracleLogits, MatchesReferenceEngine) {
  const ArchCase& c = GetParam();
  const auto dir = oracle_dir() / "archs";
  const auto [r, vs_cpu] = whole_gpu_against_reference((dir / "models" / c.model).string(),
                                                       (dir / "logits" / c.logits).string());
  if (c.model.find("-F16") != std::string::npos) {
    EXPECT_LT(r.worst_row_nmse, 1e-5);
  } else {
    EXPECT_LT(r.first_row_nmse, c.model.find("gpt-oss") != std::string::npos ? 2e-3 : 1e-5);
    EXPECT_LT(r.nmse_unflipped, 1e-3);
    EXPECT_LT(r.nmse, 3e-3);
    EXPECT_LE(r.rows_over_1e2, 2);
  }
  EXPECT_GE(r.argmax_agree, r.clear_rows - 1) << "argmax disagrees on clear rows";
}

INSTANTIATE_TEST_SUITE_P(Archs, GpuArchOracleLogits, testing::ValuesIn(arch_cases()),
                         [](const testing::TestParamInfo<ArchCase>& info) {
                           return arch_case_name(info.param);
                         });

// A hybrid plan: odd experts of every layer in RAM, the rest on the GPU. The RAM experts run on
// the CPU from the GPU's routing (glm4moe's sigmoid weights cross over scaled; gpt-oss's expert
// biases and clamped SwiGLU on both sides), from pinned copies (expert biases re-slotted with
// them) or from the file's pages, or are uploaded for the prompt batch (STRATA_PROMPT_EXPERTS=gpu,
// the biases then applied on the GPU to the uploaded slots only).
TEST(GpuArchOracleLogits, OddExpertsInRamMatchTheReference) {
  const auto dir = oracle_dir() / "archs";
  const std::pair<const char*, const char*> modes[] = {{"STRATA_PINNED_EXPERTS", "on"},
                                                       {"STRATA_PINNED_EXPERTS", "off"},
                                                       {"STRATA_PROMPT_EXPERTS", "gpu"}};
  for (const auto& [variable, value] : modes) {
    setenv(variable, value, 1);
    for (const char* name : {"tiny-glm4moe-Q8_0", "tiny-mixtral-Q8_0", "tiny-qwen3next-Q8_0",
                             "tiny-gpt-oss-MXFP4_MOE"}) {
      SCOPED_TRACE(testing::Message() << variable << "=" << value);
      const GpuOracleCase c{(dir / "models" / (std::string(name) + ".gguf")).string(),
                            (dir / "logits" / (std::string(name) + ".p24.f16kv.orcl")).string(),
                            "f16", false};
      const ModelHParams hp = hparams_of(c.model);
      plan::Placement placement = all_on_gpu(hp);
      for (auto& l : placement.layers)
        for (size_t e = 0; e < l.expert_device.size(); ++e) l.expert_device[e] = e % 2 == 0 ? 1 : 0;
      auto gpu = vk::load_gpu_model(c.model, vk::test::shared_test_device(), &placement);
      const auto reference = LogitsFile::read(c.logits);
      const LogitsComparison r =
          compare_logits(reference, teacher_forced_logits(*gpu, reference, "f16", 2));
      ASSERT_NE(vk::hybrid_timeline(*gpu), nullptr);
      EXPECT_FALSE(vk::hybrid_timeline(*gpu)->layers.empty())
          << name << ": no expert ran on the CPU";
      std::printf(
          "%-24s odd experts in RAM: nmse %.2e (unflipped %.2e)  first row %.2e  argmax %d/%d\n",
          name, r.nmse, r.nmse_unflipped, r.first_row_nmse, r.argmax_agree, r.clear_rows);
      EXPECT_LT(r.first_row_nmse,
                std::string(name).find("gpt-oss") != std::string::npos ? 2e-3 : 1e-5)
          << name;
      EXPECT_LT(r.nmse_unflipped, 1e-3) << name;
      EXPECT_LE(r.rows_over_1e2, 2) << name;
      EXPECT_GE(r.argmax_agree, r.clear_rows - 1) << name;
    }
    unsetenv(variable);
  }
}

}  // namespace
}  // namespace strata::test
