#pragma once
// Internal: the tile GEMMs (TypeKernels::gemm) built for AVX-512 VNNI, one file per format.

#include <cstdint>

namespace strata::quant {

void gemm_q4k_avx512(int64_t n, const void* weights, int64_t w_stride, int64_t n_rows,
                     const uint8_t* const* act, int64_t n_cols, float* out, int64_t out_stride);
void gemm_q5k_avx512(int64_t n, const void* weights, int64_t w_stride, int64_t n_rows,
                     const uint8_t* const* act, int64_t n_cols, float* out, int64_t out_stride);

void gemm_q8_0_avx512(int64_t n, const void* weights, int64_t w_stride, int64_t n_rows,
                      const uint8_t* const* act, int64_t n_cols, float* out, int64_t out_stride);

}  // namespace strata::quant
