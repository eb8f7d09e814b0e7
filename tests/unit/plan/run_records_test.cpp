// Learning from this machine's runs (issue 40): `strata bench` records what a run took, and the
// plan's calibrated CPU is corrected by the median of measured / predicted over the records.

#include "plan/run_records.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "gguf/gguf_file.h"
#include "plan/calibration.h"
#include "plan/cost_model.h"
#include "plan/inventory.h"
#include "support/test_support.h"

namespace strata::plan {
namespace {

RunRecord record(const std::string& cpu, int threads, double tg) {
  RunRecord r;
  r.cpu_model = cpu;
  r.threads = threads;
  r.model_path = "/models/m.gguf";
  r.model_bytes = 1000;
  r.n_prompt = 512;
  r.n_gen = 128;
  r.pp_tok_s = 500;
  r.tg_tok_s = tg;
  r.date = "2026-12-05";
  return r;
}

TEST(RunRecords, KeptPerMachineNewestFirstCapped) {
  const std::string path = (test::temp_dir() / "records" / "hardware.json").string();
  append_run_record(path, record("Other CPU", 2, 7));
  for (int i = 0; i < kMaxRunRecords + 5; ++i) append_run_record(path, record("This CPU", 2, i));
  const auto mine = run_records(path, "This CPU", 2);
  ASSERT_EQ(mine.size(), static_cast<size_t>(kMaxRunRecords));
  EXPECT_EQ(mine.front().tg_tok_s, 5);  // the 5 oldest went
  EXPECT_EQ(mine.back().tg_tok_s, kMaxRunRecords + 4);
  EXPECT_EQ(run_records(path, "Other CPU", 2).size(), 1u);  // other machines' stay
  EXPECT_TRUE(run_records(path, "This CPU", 4).empty());    // another thread count is another
}

// A record carries the kernels that ran; runs of older kernels (another calibration version, or
// no stamp: before there was one) are not this build's speed and are left out.
TEST(RunRecords, OnlyRunsOfThisBuildsKernelsCount) {
  const std::string path = (test::temp_dir() / "records-kernels" / "hardware.json").string();
  append_run_record(path, record("This CPU", 2, 50));
  update_hardware_cache(path, [](nlohmann::json& j) {
    nlohmann::json old = j["run_records"][0];
    old["tg_tok_s"] = 10;
    old["kernels"] = kKernelsVersion - 1;
    j["run_records"].push_back(old);
    old.erase("kernels");
    old["tg_tok_s"] = 20;
    j["run_records"].push_back(old);
  });
  const auto mine = run_records(path, "This CPU", 2);
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_EQ(mine[0].tg_tok_s, 50);
  EXPECT_EQ(mine[0].kernels, kKernelsVersion);
}

// Each record names the command that measured it; records from before that field read as
// unnamed, and the plan says which commands its corrections came from.
TEST(RunRecords, RecordsNameTheCommandThatMeasuredThem) {
  const std::string path = (test::temp_dir() / "records-source" / "hardware.json").string();
  RunRecord served = record("This CPU", 2, 40);
  served.source = "serve";
  append_run_record(path, served);
  append_run_record(path, served);
  RunRecord benched = record("This CPU", 2, 42);
  benched.source = "bench";
  append_run_record(path, benched);
  update_hardware_cache(path, [](nlohmann::json& j) {
    nlohmann::json old = j["run_records"][0];
    old.erase("source");
    j["run_records"].push_back(old);
  });
  const auto mine = run_records(path, "This CPU", 2);
  ASSERT_EQ(mine.size(), 4u);
  EXPECT_EQ(mine[0].source, "serve");
  EXPECT_EQ(mine[2].source, "bench");
  EXPECT_EQ(mine[3].source, "");
  const LearnedCorrection l = learn_from_runs(mine, [](const RunRecord&) {
    return PredictedRun{500, 40};
  });
  EXPECT_EQ(l.runs, 4);
  EXPECT_EQ(l.sources, "an earlier strata x1, strata bench x1, strata serve x2");
}

TEST(RunRecords, TheMedianCorrectsAndOneOddRunMovesNothing) {
  // Predicted 100 tok/s decode for every record; measured 80, 80, 80 and one odd 10.
  const std::vector<RunRecord> records = {record("c", 2, 80), record("c", 2, 80),
                                          record("c", 2, 10), record("c", 2, 80)};
  const LearnedCorrection l = learn_from_runs(records, [](const RunRecord&) {
    return PredictedRun{400, 100};
  });
  EXPECT_EQ(l.runs, 4);
  EXPECT_NEAR(l.decode, 100.0 / 80, 1e-12);  // predicted times x1.25: 80 tok/s
  EXPECT_NEAR(l.decode_error, 0.25, 1e-12);  // predictions were 25% fast
  EXPECT_NEAR(l.prefill, 400.0 / 500, 1e-12);
  // A record the model cannot predict (its file is gone) is left out.
  EXPECT_EQ(learn_from_runs(records, [](const RunRecord&) { return PredictedRun{}; }).runs, 0);
}

// A deliberately wrong calibration (every rate twice what the machine does) and one recorded
// run of the model at the machine's real speed: the plan's prediction for that model moves onto
// the measured speed.
TEST(RunRecords, ARecordedRunCorrectsAWrongCalibration) {
  const std::string model = (test::oracle_dir() / "models" / "tiny-qwen3moe-Q8_0.gguf").string();
  const ModelInventory inv = inventory_from_gguf(GgufFile::open(model));
  CpuCalibration cal;
  cal.cpu_model = "Test CPU";
  cal.threads = 2;
  cal.dispatch_us = 2;
  cal.gemv_fixed_us = 5;
  cal.serial = {1.0, 0.5, 2.0, 0.25, 3.0};
  cal.attention_kv_ns = cal.attention_head_ns = 0.1;
  cal.attention_block_kv_ns = cal.attention_block_head_ns = 0.05;
  cal.types = {{GgmlType::F32, 20, 10, 10, 8, 18, 16, 6, 4},
               {GgmlType::Q8_0, 50, 120, 100, 80, 44, 36, 18, 14}};
  HardwareProfile hw;
  hw.cpu_model = "Test CPU";
  hw.physical_cores = hw.threads = 2;
  hw.ram_bandwidth_gbps = 30;
  hw.cpu_calibration = cal;
  const Placement cpu = cpu_placement(inv);
  const CostConstants& c = default_cost_constants();
  const double predicted_tg = estimate_decode(inv, hw, cpu, 2.0, 64, c).tokens_per_second();

  const std::string path = (test::temp_dir() / "learn" / "hardware.json").string();
  RunRecord r = record("Test CPU", 2, predicted_tg / 2);  // the machine does half
  r.model_path = std::filesystem::absolute(model).string();
  r.model_bytes = std::filesystem::file_size(model);
  r.pp_tok_s = 0;  // decode only
  append_run_record(path, r);
  const LearnedCorrection l = apply_run_records(hw, path, model);
  EXPECT_EQ(l.runs, 1);
  EXPECT_NEAR(l.decode_error, 1.0, 1e-6);  // predictions were twice the measured speed
  EXPECT_NEAR(estimate_decode(inv, hw, cpu, 2.0, 64, c).tokens_per_second(), predicted_tg / 2,
              1e-6 * predicted_tg);
  EXPECT_EQ(hw.cpu_calibration->prefill_correction, 1);  // no prefill recorded
  // A tiny model's records teach nothing about another model.
  HardwareProfile other = hw;
  other.cpu_calibration = cal;
  EXPECT_EQ(apply_run_records(other, path, "/models/another.gguf").runs, 0);
}

}  // namespace
}  // namespace strata::plan
