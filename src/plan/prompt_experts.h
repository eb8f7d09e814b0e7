#pragma once
// Prompt batches through a layer whose routed experts the plan keeps in RAM: either the CPU
// computes the batch's (token, expert) pairs of those experts, or the layer's RAM experts are
// uploaded for the batch (one copy over PCIe) and the GPU computes them. llama.cpp streams
// CPU-resident weights for every batch of 32 tokens or more; strata chooses per layer and batch
// size by the two times below.

#include <cstdint>

#include "plan/cost_model.h"

namespace strata::plan {

struct RamExpertsBatch {
  int64_t n_tokens = 0;
  int64_t n_expert = 0, n_expert_used = 0;
  int64_t ram_experts = 0;    // of the layer's routed experts, in RAM
  double expert_bytes = 0;    // one expert's gate, up and down matrices
  double flops_per_pair = 0;  // one token through one expert: 2 x its weights
};

struct RamExpertsMachine {
  int cpu_cores = 1;
  bool avx512 = false;
  double pcie_gbps = 16;  // the link's nominal rate (PCIe 3.0 x16: the field's cards)
  double gpu_gbps = 300;  // VRAM bandwidth, which sets the GPU's compute rate (gpu_flops_per_byte)
};

struct RamExpertsChoice {
  double cpu_ms = 0;     // the CPU computing the batch's pairs of RAM experts
  double upload_ms = 0;  // uploading the layer's RAM experts, then the GPU computing those pairs
  bool upload() const { return upload_ms < cpu_ms; }
};

// Routing taken as uniform: the batch sends n_tokens x n_expert_used x ram / n_expert pairs to
// the RAM experts.
RamExpertsChoice choose_ram_experts_path(const RamExpertsBatch& batch,
                                         const RamExpertsMachine& machine,
                                         const CostConstants& c = default_cost_constants());

}  // namespace strata::plan
