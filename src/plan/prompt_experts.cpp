#include "plan/prompt_experts.h"

#include <algorithm>

namespace strata::plan {

RamExpertsChoice choose_ram_experts_path(const RamExpertsBatch& b, const RamExpertsMachine& m,
                                         const CostConstants& c) {
  RamExpertsChoice out;
  if (b.ram_experts <= 0 || b.n_expert <= 0) return out;
  const double pairs = static_cast<double>(b.n_tokens * b.n_expert_used) *
                       static_cast<double>(b.ram_experts) / static_cast<double>(b.n_expert);
  const double flops = pairs * b.flops_per_pair;
  const double cpu_gflops = std::max(m.cpu_cores, 1) *
                            (m.avx512 ? c.cpu_gflops_per_core_avx512 : c.cpu_gflops_per_core_avx2);
  out.cpu_ms = flops / (cpu_gflops * 1e6);
  const double upload_bytes = static_cast<double>(b.ram_experts) * b.expert_bytes;
  out.upload_ms = upload_bytes / (m.pcie_gbps * c.pcie_stream_efficiency * 1e6) +
                  flops / (m.gpu_gbps * c.gpu_flops_per_byte * 1e6);
  return out;
}

}  // namespace strata::plan
