#pragma once
// Internal: the tile GEMMs (TypeKernels::gemm) built for AVX-512 VNNI, one file per format.

#include <cstdint>

namespace strata::quant {

void gemm_q4k_avx512(int64_t n, const void* weights, int64_t w_stride, int64_t n_rows,
                     const uint8_t* const* act, int64_t n_cols, float* out, int64_t out_stride);
void gemm_q5k_avx512(int64_t n, const void* weights, int64_t w_stride, int64_t n_rows,
                     const uint8_t* const* act, int64_t n_cols, float* out, int64_t out_stride);

void gemm_q6k_avx512(int64_t n, const void* weights, int64_t w_stride, int64_t n_rows,
                     const uint8_t* const* act, int64_t n_cols, float* out, int64_t out_stride);
void gemm_iq4xs_avx512(int64_t n, const void* weights, int64_t w_stride, int64_t n_rows,
                       const uint8_t* const* act, int64_t n_cols, float* out, int64_t out_stride);

struct KernelTable;
// Q8_0, Q4_0, IQ4_NL and MXFP4 (gemm_quad_avx512.cpp).
void fill_gemm_quads_avx512(KernelTable& table);

}  // namespace strata::quant
