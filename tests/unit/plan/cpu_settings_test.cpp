#include "plan/cpu_settings.h"

#include <gtest/gtest.h>

#include "gguf/gguf_file.h"
#include "support/test_support.h"
#include "util/error.h"

namespace strata::plan {
namespace {

ModelInventory tiny() {
  return inventory_from_gguf(
      GgufFile::open((test::oracle_dir() / "models" / "tiny-qwen3moe-Q4_K_M.gguf").string()));
}

TEST(CpuSettings, ReadsWeightsIntoRamWhenEverythingFits) {
  const ModelInventory inv = tiny();
  const CpuRunSettings s = choose_cpu_settings(inv, uint64_t{8} << 30, 6, 4096);
  EXPECT_EQ(s.threads, 6);
  EXPECT_EQ(s.load, LoadMode::ram);
  EXPECT_EQ(s.kv_type, GgmlType::F16);
  EXPECT_NE(s.reason.find("read into RAM"), std::string::npos) << s.reason;
}

TEST(CpuSettings, MapsWeightsThenHalvesTheCacheAsMemoryShrinks) {
  const ModelInventory inv = tiny();
  const uint64_t reserve = 1 << 20;
  const int64_t positions = 100000;
  const uint64_t kv_f16 = inv.kv_bytes_per_token(2.0) * positions;
  const uint64_t kv_q8 = inv.kv_bytes_per_token(34.0 / 32.0) * positions;
  ASSERT_LT(kv_q8, kv_f16);
  // Room for the f16 cache but not also the weights: mapped weights, f16 cache.
  CpuRunSettings s =
      choose_cpu_settings(inv, reserve + kv_f16 + inv.total_bytes() / 2, 2, positions, reserve);
  EXPECT_EQ(s.load, LoadMode::mmap);
  EXPECT_EQ(s.kv_type, GgmlType::F16);
  // Room for a q8_0 cache only.
  s = choose_cpu_settings(inv, reserve + kv_q8, 2, positions, reserve);
  EXPECT_EQ(s.load, LoadMode::mmap);
  EXPECT_EQ(s.kv_type, GgmlType::Q8_0);
  // Not even that: a clear error naming the sizes.
  try {
    choose_cpu_settings(inv, reserve + kv_q8 / 2, 2, positions, reserve);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("100000 positions"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata::plan
