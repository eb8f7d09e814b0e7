#pragma once
// Internal: the tile GEMMs (TypeKernels::gemm) built for AVX-512 VNNI, one file per format.

#include <cstdint>

namespace strata::quant {

struct KernelTable;
// Q8_0, Q4_0, IQ4_NL and MXFP4 (gemm_quad_avx512.cpp).
void fill_gemm_quads_avx512(KernelTable& table);
// Q4_K and Q5_K (gemm_k4_avx512.cpp).
void fill_gemm_k4_avx512(KernelTable& table);
// Q6_K and IQ4_XS (gemm_super_avx512.cpp).
void fill_gemm_super_avx512(KernelTable& table);
// Compact tiles of Q6_K and IQ4_XS (gemm_compact_avx512.cpp).
void fill_gemm_compact_avx512(KernelTable& table);
// Compact tiles of Q4_K (gemm_compact_k4_avx512.cpp).
void fill_gemm_compact_k4_avx512(KernelTable& table);
// Compact tiles of Q8_0, Q4_0, IQ4_NL and MXFP4 (gemm_compact_quad_avx512.cpp).
void fill_gemm_compact_quads_avx512(KernelTable& table);

}  // namespace strata::quant
