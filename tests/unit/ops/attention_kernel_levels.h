#pragma once
// The instruction-set levels of a family of Q8_0 attention kernels (attention_q8.h's scores,
// attention_q8_values.h's values) that this CPU runs, for the tests that check every level
// against the written-out definition.

#include <vector>

#include "util/cpu_features.h"

namespace strata::ops::test_kv {

template <typename Kernels>
struct KernelLevel {
  const char* name;
  Kernels kernels;
  bool fused;  // multiply-adds fused (FMA levels)
};

// The family's kernels_baseline, kernels_avx2, kernels_avx2_loops and kernels_avx512.
template <typename Kernels>
std::vector<KernelLevel<Kernels>> kernel_levels(Kernels (*baseline)(), Kernels (*avx2)(),
                                                Kernels (*avx2_loops)(), Kernels (*avx512)()) {
  const CpuFeatures& cpu = cpu_features();
  std::vector<KernelLevel<Kernels>> out = {{"baseline", baseline(), false}};
  if (cpu.has_avx2_level()) {
    out.push_back({"avx2", avx2(), true});
    out.push_back({"avx2_loops", avx2_loops(), true});
  }
  if (cpu.has_avx512_level()) out.push_back({"avx512", avx512(), true});
  return out;
}

}  // namespace strata::ops::test_kv
