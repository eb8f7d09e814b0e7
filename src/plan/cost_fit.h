#pragma once
// The cost model's fitted constants (cost_model.h), fitted to published runs of llama.cpp and
// ik_llama.cpp (bench/published/runs.json) and checked by leaving each source out: fit on the
// other sources' runs, predict the held-out source's. A prediction is a sum of physical terms
// (bytes over bandwidths, kernels, hops, arithmetic over throughputs), each the term computed with
// a unit constant times the constant, so the fit is a least-squares problem on relative errors
// with a weak pull toward each constant's physically expected value (its prior) and
// non-negative constants, inside a search over the one constant that enters non-linearly (the
// per-thread read bandwidth).

#include <cstdint>
#include <string>
#include <vector>

#include "plan/cost_model.h"
#include "plan/given_placement.h"

namespace strata::plan {

struct PublishedRun {
  int row = 0;  // in runs.json
  std::string source, author, engine, arch;
  ModelInventory inventory;
  HardwareProfile hardware;
  Placement placement;
  double kv_bytes_per_element = 2.0;
  int64_t depth = 0;  // cached positions when decode was measured
  double decode_tok_s = 0;
  double prompt_tok_s = 0;  // 0: not published
  int64_t prompt_tokens = 512;
  int64_t micro_batch = 512;
  bool ik_llama = false;  // ik_llama.cpp (its prompt kernels are fitted apart)
};

// The used rows of runs.json (the excluded ones say why there). Throws strata::Error with the
// row for a row it cannot build.
std::vector<PublishedRun> load_published_runs(const std::string& path);

// Predicted decode and prompt speed (tokens/s) of a run with the given constants.
double predict_decode(const PublishedRun& run, const CostConstants& c);
double predict_prompt(const PublishedRun& run, const CostConstants& c);

// The constants that fit `runs` best (those not fitted are taken from `base`).
CostConstants fit_cost_constants(const std::vector<const PublishedRun*>& runs,
                                 const CostConstants& base = CostConstants{});

struct HeldOutPrediction {
  const PublishedRun* run = nullptr;
  double decode_error = 0;  // predicted / published - 1
  double prompt_error = 0;  // 0 when no prompt speed was published
};
// Leave-one-source-out: every run predicted by constants fitted without its author's runs.
std::vector<HeldOutPrediction> leave_one_source_out(const std::vector<PublishedRun>& runs);

// Median and 90th percentile of |error| (nearest rank).
struct ErrorSummary {
  int runs = 0;
  double median = 0, p90 = 0;
};
ErrorSummary summarize_errors(std::vector<double> errors);

}  // namespace strata::plan
