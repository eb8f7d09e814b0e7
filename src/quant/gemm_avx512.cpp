// Registers the AVX-512 tile GEMMs. Formats without one keep their vec_dot_multi path.

#include "quant/gemm_avx512.h"

#include "quant/kernel_table.h"

namespace strata::quant {

void fill_gemm_avx512(KernelTable& table) {
  table[GgmlType::Q4_K].gemm = gemm_q4k_avx512;
  table[GgmlType::Q5_K].gemm = gemm_q5k_avx512;
  table[GgmlType::Q6_K].gemm = gemm_q6k_avx512;
  table[GgmlType::IQ4_XS].gemm = gemm_iq4xs_avx512;
  fill_gemm_quads_avx512(table);
}

}  // namespace strata::quant
