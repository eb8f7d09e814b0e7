#pragma once
// Which placement a GPU run executes: a saved plan (--plan), the flags users know from llama.cpp
// (--n-cpu-moe, --cpu-moe, --gpu-layers, -ot overrides), or, with none of them, the planner's
// choice for the device's memory (--vram-budget) when the whole model does not fit.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "plan/cost_model.h"
#include "plan/given_placement.h"

namespace strata::cli {

struct ModelOptions;

struct PlacementRequest {
  std::string plan_file;    // --plan FILE.json (`strata plan --json`)
  plan::GivenFlags flags;   // --n-cpu-moe, --cpu-moe, --gpu-layers, --override-tensor
  std::string hot_experts;  // --hot-experts FILE: expert popularity for the planner
  bool any_flag() const { return !plan_file.empty() || flags.any(); }
};

// The placement to run on GPUs with budgets[i] bytes of memory each (0: unknown), or nullopt for
// every tensor on the one GPU. Several GPUs always get a placement: the layers split in
// proportion to their memory, as llama.cpp splits them. Throws strata::Error for a plan or flags
// this model cannot take, and for a model that fits nowhere.
std::optional<plan::Placement> choose_gpu_placement(const ModelOptions& options,
                                                    const std::vector<uint64_t>& budgets);

}  // namespace strata::cli
