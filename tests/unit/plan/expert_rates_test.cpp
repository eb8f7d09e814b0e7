// Expert rates: strata's MoE block timed phase by phase over experts laid out in a buffer. No
// assertion on speed (a unit test on a shared machine cannot make one), only on when rates are
// measured at all and that the profiler the measurement borrows is left as it was found.

#include "plan/expert_rates.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "quant/quant.h"
#include "util/profiler.h"

namespace strata::plan {
namespace {

constexpr int64_t kCols = 512, kFf = 256;

// `bytes` of Q4_K rows of kCols values quantized from random numbers.
std::vector<uint8_t> q4k_rows(int64_t bytes) {
  const int64_t row_bytes = quant::row_bytes(GgmlType::Q4_K, kCols);
  std::vector<uint8_t> buffer(static_cast<size_t>(bytes));
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> row(kCols);
  for (int64_t r = 0; r < bytes / row_bytes; ++r) {
    for (auto& v : row) v = normal(rng);
    quant::traits(GgmlType::Q4_K)
        .kernels.quantize_row(row.data(), buffer.data() + r * row_bytes, kCols);
  }
  return buffer;
}

int64_t expert_bytes() {
  return 2 * kFf * quant::row_bytes(GgmlType::Q4_K, kCols) +
         kCols * quant::row_bytes(GgmlType::Q4_K, kFf);
}

ExpertBuffer experts_in(const std::vector<uint8_t>& buffer) {
  return {buffer.data(), static_cast<int64_t>(buffer.size()), GgmlType::Q4_K, kCols, kFf};
}

bool positive_finite(double x) {
  return std::isfinite(x) && x > 0;
}

const SerialCosts kSerial{1.0, 0.1, 2.0, 0.1, 2.0};

TEST(ExpertRates, DecodeAndPrefillMeasureBothPhasesWhenExpertsFit) {
  const auto buffer = q4k_rows(6 * expert_bytes());
  ThreadPool pool(2);
  const ExpertPhaseRates decode =
      measure_expert_decode_rates(experts_in(buffer), 8, kSerial, pool, 0.002, 3);
  EXPECT_TRUE(positive_finite(decode.gate_up)) << decode.gate_up;
  EXPECT_TRUE(positive_finite(decode.down)) << decode.down;
  const ExpertPrefillRates prefill =
      measure_expert_prefill_rates(experts_in(buffer), 8, kSerial, pool, 0.002, 2);
  for (const ExpertPrefillCost& c : {prefill.gate_up, prefill.down}) {
    EXPECT_TRUE(positive_finite(c.gbps)) << c.gbps;
    EXPECT_TRUE(positive_finite(c.gmacs)) << c.gmacs;
  }
}

// Small-op costs measured at a busier moment than the phases (here: absurdly high) leave nothing
// of a phase once subtracted: its whole time gives the rate then, not a zero that says nothing.
TEST(ExpertRates, APhaseShorterThanItsSmallOpsIsTimedWhole) {
  const auto buffer = q4k_rows(6 * expert_bytes());
  ThreadPool pool(2);
  const SerialCosts inflated{1.0, 1e6, 1e6, 1e6, 2.0};
  const ExpertPhaseRates decode =
      measure_expert_decode_rates(experts_in(buffer), 8, inflated, pool, 0.002, 2);
  EXPECT_TRUE(positive_finite(decode.gate_up)) << decode.gate_up;
  EXPECT_TRUE(positive_finite(decode.down)) << decode.down;
}

TEST(ExpertRates, NothingMeasuredWhenFewerThanTwoExpertsFit) {
  const auto buffer = q4k_rows(2 * expert_bytes() - 1);
  ThreadPool pool(1);
  const ExpertPhaseRates decode =
      measure_expert_decode_rates(experts_in(buffer), 8, kSerial, pool, 0.002, 1);
  EXPECT_EQ(decode.gate_up, 0);
  EXPECT_EQ(decode.down, 0);
  const ExpertPrefillRates prefill =
      measure_expert_prefill_rates(experts_in(buffer), 8, kSerial, pool, 0.002, 1);
  EXPECT_EQ(prefill.gate_up.gmacs, 0);
  EXPECT_EQ(prefill.down.gbps, 0);
}

TEST(ExpertRates, LeaveTheProfilerAsTheyFoundIt) {
  const auto buffer = q4k_rows(4 * expert_bytes());
  ThreadPool pool(1);
  for (bool enabled : {false, true}) {
    profile::set_enabled(enabled);
    measure_expert_decode_rates(experts_in(buffer), 8, kSerial, pool, 0.001, 1);
    measure_expert_prefill_rates(experts_in(buffer), 8, kSerial, pool, 0.001, 1);
    EXPECT_EQ(profile::enabled(), enabled);
    for (const auto& e : profile::snapshot()) {
      EXPECT_EQ(e.calls, 0u) << e.name;  // their own phases are not left in the profile
    }
  }
  profile::set_enabled(false);
}

}  // namespace
}  // namespace strata::plan
