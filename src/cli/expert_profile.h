#pragma once
// The expert-popularity file `strata plan --profile` reads, written by `strata profile` and by
// `strata serve --expert-profile`: {"expert_counts": [[selections per expert] per layer], ...}.

#include <cstdint>
#include <string>
#include <vector>

#include "model/hparams.h"

namespace strata::cli {

// How uneven routing was: the share of a layer's selections its `busiest` experts took, averaged
// over layers (uniform routing: busiest / n_expert).
struct RoutingSkew {
  int64_t busiest = 0;  // a tenth of the experts, rounded (at least one)
  int64_t n_expert = 0;
  double share = 0;
};

// Writes the file and returns the skew it shows. counts: [n_layer * n_expert].
RoutingSkew write_expert_profile(const std::string& path, const std::string& model_path,
                                 const ModelHParams& hp, const std::vector<uint64_t>& counts,
                                 int64_t tokens, int64_t prompts);

}  // namespace strata::cli
