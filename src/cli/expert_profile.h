#pragma once
// The expert-popularity file `strata plan --profile` reads, written by `strata profile` and by
// `strata serve --expert-profile`: {"expert_counts": [[selections per expert] per layer], ...}.

#include <cstdint>
#include <string>
#include <vector>

#include "model/hparams.h"

namespace strata::cli {

// Writes the file; returns the share of selections taken by the busiest 10% of experts
// (averaged over layers; 0.1 for uniform routing). counts: [n_layer * n_expert].
double write_expert_profile(const std::string& path, const std::string& model_path,
                            const ModelHParams& hp, const std::vector<uint64_t>& counts,
                            int64_t tokens, int64_t prompts);

}  // namespace strata::cli
