// Registers the AVX-512 tile GEMMs. Formats without one keep their vec_dot_multi path.

#include "quant/gemm_avx512.h"

#include "quant/kernel_table.h"

namespace strata::quant {

void fill_gemm_avx512(KernelTable& table) {
  fill_gemm_k4_avx512(table);
  fill_gemm_super_avx512(table);
  fill_gemm_compact_avx512(table);
  fill_gemm_compact_k4_avx512(table);
  fill_gemm_compact_quads_avx512(table);
  fill_gemm_quads_avx512(table);
}

}  // namespace strata::quant
