// The choice between computing a prompt batch's RAM experts on the CPU and uploading them.

#include "plan/prompt_experts.h"

#include <gtest/gtest.h>

namespace strata::plan {
namespace {

// A Qwen3-30B-A3B layer (128 experts, 8 used, 2048 x 768, Q4_K-ish 2.65 MB per expert) wholly in
// RAM, on FIELD C2's machine: 8 AVX2 cores, PCIe 3.0 x16, a 448 GB/s card.
RamExpertsBatch qwen3_30b_layer(int64_t n_tokens) {
  RamExpertsBatch b;
  b.n_tokens = n_tokens;
  b.n_expert = 128;
  b.n_expert_used = 8;
  b.ram_experts = 128;
  b.expert_bytes = 2.65e6;
  b.flops_per_pair = 2.0 * 3 * 2048 * 768;
  return b;
}

RamExpertsMachine c2() {
  RamExpertsMachine m;
  m.cpu_cores = 8;
  m.pcie_gbps = 16;
  m.gpu_gbps = 448;
  return m;
}

TEST(PromptExperts, BigBatchesUploadSmallOnesStayOnTheCpu) {
  // 340 MB over the PCIe stream's rate plus 38.7 GFLOP of GPU compute at its FLOP per byte of
  // 448 GB/s; 512 x 8 pairs x 9.4 MFLOP on 8 cores (cost_model.h's fitted constants).
  const CostConstants& c = default_cost_constants();
  const RamExpertsChoice big = choose_ram_experts_path(qwen3_30b_layer(512), c2());
  const double flops = 512 * 8 * 2.0 * 3 * 2048 * 768;
  EXPECT_NEAR(big.upload_ms,
              128 * 2.65e6 / (16 * c.pcie_stream_efficiency * 1e6) +
                  flops / (448 * c.gpu_flops_per_byte * 1e6),
              0.5);
  EXPECT_NEAR(big.cpu_ms, flops / (8 * c.cpu_gflops_per_core_avx2 * 1e6), 1.0);
  EXPECT_TRUE(big.upload());
  EXPECT_FALSE(choose_ram_experts_path(qwen3_30b_layer(32), c2()).upload());
  // One crossover: every batch past it uploads.
  int64_t first_upload = -1;
  for (int64_t n = 1; n <= 1024; ++n) {
    const bool up = choose_ram_experts_path(qwen3_30b_layer(n), c2()).upload();
    if (up && first_upload < 0) first_upload = n;
    if (first_upload >= 0) {
      EXPECT_TRUE(up) << n;
    }
  }
  EXPECT_GT(first_upload, 32);
  EXPECT_LT(first_upload, 512);
}

TEST(PromptExperts, FewRamExpertsFavourTheCpuNoneCostsNothing) {
  RamExpertsBatch b = qwen3_30b_layer(512);
  b.ram_experts = 0;
  const RamExpertsChoice none = choose_ram_experts_path(b, c2());
  EXPECT_EQ(none.cpu_ms, 0);
  EXPECT_EQ(none.upload_ms, 0);
  EXPECT_FALSE(none.upload());
  // Fewer experts in RAM scale both sides alike (uniform routing): the choice holds.
  b.ram_experts = 16;
  EXPECT_TRUE(choose_ram_experts_path(b, c2()).upload());
  // A faster CPU (AVX-512, 16 cores) moves the crossover up.
  RamExpertsMachine fast = c2();
  fast.cpu_cores = 16;
  fast.avx512 = true;
  EXPECT_FALSE(choose_ram_experts_path(qwen3_30b_layer(256), fast).upload());
  EXPECT_TRUE(choose_ram_experts_path(qwen3_30b_layer(256), c2()).upload());
}

}  // namespace
}  // namespace strata::plan
