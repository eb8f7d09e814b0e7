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
  // Today's errors (decode 13.4% / 48.6%, prompt 52.1% / 176%) with a little room: a change
  // that makes them worse fails. The issue's goal (10% / 20%, prompt 15% / 30%) is not reached.
  EXPECT_LE(d.median, 0.15);
  EXPECT_LE(d.p90, 0.52);
  EXPECT_LE(p.median, 0.55);
  EXPECT_LE(p.p90, 1.85);
}

TEST(PublishedRuns, TheShippedConstantsAreTheFitToAllRuns) {
  std::vector<const PublishedRun*> all;
  for (const PublishedRun& r : runs()) all.push_back(&r);
  const CostConstants fit = fit_cost_constants(all);
  const CostConstants& shipped = default_cost_constants();
  std::printf(
      "fit: cpu_core_gbps %.0f, cpu_bandwidth_efficiency %.3f, gpu_bandwidth_efficiency %.3f, "
      "cpu_attention_efficiency %.3f, gpu_attention_efficiency %.3f, gpu_kernel_us %.2f, "
      "cpu_op_us %.2f, hop_ms %.4f, gpu_flops_per_byte %.1f, pcie_stream_efficiency %.3f, "
      "cpu_gflops_per_core_avx2 %.1f, gpu_expert_product_us %.2f, cpu_expert_product_us %.2f, "
      "ik: %.1f %.3f %.1f %.2f %.2f\n",
      fit.cpu_core_gbps, fit.cpu_bandwidth_efficiency, fit.gpu_bandwidth_efficiency,
      fit.cpu_attention_efficiency, fit.gpu_attention_efficiency, fit.gpu_kernel_us, fit.cpu_op_us,
      fit.hop_ms, fit.gpu_flops_per_byte, fit.pcie_stream_efficiency, fit.cpu_gflops_per_core_avx2,
      fit.gpu_expert_product_us, fit.cpu_expert_product_us, fit.ik_gpu_flops_per_byte,
      fit.ik_pcie_stream_efficiency, fit.ik_cpu_gflops_per_core_avx2, fit.ik_gpu_expert_product_us,
      fit.ik_cpu_expert_product_us);
  const auto same = [](double a, double b) { return std::abs(a / b - 1) < 0.01; };
  EXPECT_EQ(fit.cpu_core_gbps, shipped.cpu_core_gbps);
  EXPECT_PRED2(same, fit.cpu_bandwidth_efficiency, shipped.cpu_bandwidth_efficiency);
  EXPECT_PRED2(same, fit.gpu_bandwidth_efficiency, shipped.gpu_bandwidth_efficiency);
  EXPECT_PRED2(same, fit.cpu_attention_efficiency, shipped.cpu_attention_efficiency);
  EXPECT_PRED2(same, fit.gpu_attention_efficiency, shipped.gpu_attention_efficiency);
  EXPECT_PRED2(same, fit.gpu_kernel_us, shipped.gpu_kernel_us);
  EXPECT_PRED2(same, fit.cpu_op_us, shipped.cpu_op_us);
  EXPECT_PRED2(same, fit.hop_ms, shipped.hop_ms);
  EXPECT_PRED2(same, fit.gpu_flops_per_byte, shipped.gpu_flops_per_byte);
  EXPECT_PRED2(same, fit.pcie_stream_efficiency, shipped.pcie_stream_efficiency);
  EXPECT_PRED2(same, fit.cpu_gflops_per_core_avx2, shipped.cpu_gflops_per_core_avx2);
  EXPECT_PRED2(same, fit.cpu_gflops_per_core_avx512, shipped.cpu_gflops_per_core_avx512);
  EXPECT_NEAR(fit.gpu_expert_product_us, shipped.gpu_expert_product_us, 0.01);
  EXPECT_NEAR(fit.cpu_expert_product_us, shipped.cpu_expert_product_us, 0.01);
}

}  // namespace
}  // namespace strata::plan
