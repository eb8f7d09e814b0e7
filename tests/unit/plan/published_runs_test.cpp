// The cost model against published runs it was not fitted to (issue 35): bench/published/runs.json
// holds llama.cpp and ik_llama.cpp runs from many sources; every source's runs are predicted by
// constants fitted to the other sources' runs only. The errors must stay within the bounds below
// (a change to the cost model that worsens them fails here), and the constants strata ships must
// be the fit to all the runs.

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>

#include "plan/cost_fit.h"
#include "support/test_support.h"

namespace strata::plan {
namespace {

const std::vector<PublishedRun>& runs() {
  static const std::vector<PublishedRun> r = load_published_runs(
      (test::test_data_dir().parent_path().parent_path() / "bench" / "published" / "runs.json")
          .string());
  return r;
}

TEST(PublishedRuns, TheDatasetCoversWhatTheIssueAsks) {
  std::set<std::string> authors, archs;
  int cpu_only = 0, hybrid = 0, prompt = 0;
  for (const PublishedRun& r : runs()) {
    authors.insert(r.author);
    archs.insert(r.inventory.arch);
    cpu_only += r.hardware.gpus.empty();
    hybrid += !r.hardware.gpus.empty() && !r.placement.layers.empty() &&
              r.placement.layers[0].expert_device[0] == kCpuDevice;
    prompt += r.prompt_tok_s > 0;
  }
  EXPECT_GE(runs().size(), 30u);
  EXPECT_GE(authors.size(), 10u);
  EXPECT_GE(archs.size(), 5u);
  EXPECT_GE(cpu_only, 5);
  EXPECT_GE(hybrid, 5);
  EXPECT_GE(prompt, 30);
}

TEST(PublishedRuns, LeaveOneSourceOutErrors) {
  const std::vector<HeldOutPrediction> held_out = leave_one_source_out(runs());
  std::map<std::string, std::vector<double>> decode, prompt;
  for (const HeldOutPrediction& p : held_out) {
    for (const std::string& key : {p.run->inventory.arch, std::string("all")}) {
      decode[key].push_back(p.decode_error);
      if (p.run->prompt_tok_s > 0) prompt[key].push_back(p.prompt_error);
    }
  }
  std::printf("%-12s %5s %8s %8s %5s %8s %8s\n", "arch", "runs", "tg med", "tg p90", "runs",
              "pp med", "pp p90");
  for (const auto& [arch, errors] : decode) {
    const ErrorSummary d = summarize_errors(errors), p = summarize_errors(prompt[arch]);
    std::printf("%-12s %5d %7.1f%% %7.1f%% %5d %7.1f%% %7.1f%%\n", arch.c_str(), d.runs,
                100 * d.median, 100 * d.p90, p.runs, 100 * p.median, 100 * p.p90);
  }
  for (const HeldOutPrediction& p : held_out) {
    std::printf("row %3d %-14s %-20s %-13s tg %+6.1f%%  pp %+6.1f%%\n", p.run->row,
                p.run->author.c_str(), p.run->arch.c_str(), p.run->engine.c_str(),
                100 * p.decode_error, 100 * p.prompt_error);
  }
  const ErrorSummary d = summarize_errors(decode["all"]), p = summarize_errors(prompt["all"]);
  // Today's errors (decode 14.8% / 34.3%, prompt 35.4% / 113%) with a little room: a change
  // that makes them worse fails. The issue's goal (10% / 20%, prompt 15% / 30%) is not reached.
  EXPECT_LE(d.median, 0.16);
  EXPECT_LE(d.p90, 0.37);
  EXPECT_LE(p.median, 0.38);
  EXPECT_LE(p.p90, 1.2);
}

TEST(PublishedRuns, TheShippedConstantsAreTheFitToAllRuns) {
  std::vector<const PublishedRun*> all;
  for (const PublishedRun& r : runs()) all.push_back(&r);
  const CostConstants fit = fit_cost_constants(all);
  const CostConstants& shipped = default_cost_constants();
  const std::pair<const char*, double CostConstants::*> fitted[] = {
      {"cpu_core_gbps", &CostConstants::cpu_core_gbps},
      {"cpu_bandwidth_efficiency", &CostConstants::cpu_bandwidth_efficiency},
      {"gpu_bandwidth_efficiency", &CostConstants::gpu_bandwidth_efficiency},
      {"cpu_attention_efficiency", &CostConstants::cpu_attention_efficiency},
      {"gpu_attention_efficiency", &CostConstants::gpu_attention_efficiency},
      {"gpu_kernel_us", &CostConstants::gpu_kernel_us},
      {"cpu_op_us", &CostConstants::cpu_op_us},
      {"cpu_op_thread_us", &CostConstants::cpu_op_thread_us},
      {"gpu_expert_decode_us", &CostConstants::gpu_expert_decode_us},
      {"cpu_expert_decode_us", &CostConstants::cpu_expert_decode_us},
      {"hop_ms", &CostConstants::hop_ms},
      {"pcie_stream_efficiency", &CostConstants::pcie_stream_efficiency},
      {"gpu_tensor_efficiency", &CostConstants::gpu_tensor_efficiency},
      {"gpu_flops_per_byte", &CostConstants::gpu_flops_per_byte},
      {"cpu_gflops_per_core_avx2", &CostConstants::cpu_gflops_per_core_avx2},
      {"cpu_gflops_per_core_avx512", &CostConstants::cpu_gflops_per_core_avx512},
      {"gpu_expert_product_us", &CostConstants::gpu_expert_product_us},
      {"cpu_expert_product_us", &CostConstants::cpu_expert_product_us},
      {"ik_gpu_tensor_efficiency", &CostConstants::ik_gpu_tensor_efficiency},
      {"ik_pcie_stream_efficiency", &CostConstants::ik_pcie_stream_efficiency},
      {"ik_cpu_gflops_per_core_avx2", &CostConstants::ik_cpu_gflops_per_core_avx2},
      {"ik_gpu_expert_product_us", &CostConstants::ik_gpu_expert_product_us},
      {"ik_cpu_expert_product_us", &CostConstants::ik_cpu_expert_product_us},
  };
  for (const auto& [name, member] : fitted) {
    std::printf("fit %-28s %.4g (shipped %.4g)\n", name, fit.*member, shipped.*member);
    // Within 1% (or 0.01 of a constant the fit holds near zero).
    EXPECT_NEAR(fit.*member, shipped.*member, std::max(0.01, 0.01 * std::abs(fit.*member))) << name;
  }
  EXPECT_EQ(shipped.hop_ms, kDefaultHopLatencyMs)
      << "hardware.h's kDefaultHopLatencyMs is the fitted hop";
}

}  // namespace
}  // namespace strata::plan
