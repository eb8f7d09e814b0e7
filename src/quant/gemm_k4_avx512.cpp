// Tile GEMMs of Q4_K and Q5_K weights with Q8_K activations (AVX-512 VNNI); the format is
// GemmK4Like (gemm_k4_avx512.h).

#include "quant/gemm_k4_avx512.h"

#include "quant/gemm_avx512.h"
#include "quant/kernel_table.h"

namespace strata::quant {

void fill_gemm_k4_avx512(KernelTable& table) {
  set_tile_kernels<GemmK4Like<false>>(table[GgmlType::Q4_K]);
  set_tile_kernels<GemmK4Like<true>>(table[GgmlType::Q5_K]);
}

}  // namespace strata::quant
