// Tile GEMMs of IQ4_XS and Q6_K weights with Q8_K activations (AVX-512 VNNI); the format is
// GemmSuper (gemm_super_avx512.h).

#include "quant/gemm_super_avx512.h"

#include "quant/gemm_avx512.h"
#include "quant/kernel_table.h"

namespace strata::quant {

void fill_gemm_super_avx512(KernelTable& table) {
  set_tile_kernels<GemmSuper<Iq4xsCodes>>(table[GgmlType::IQ4_XS]);
  set_tile_kernels<GemmSuper<Q6KCodes>>(table[GgmlType::Q6_K]);
}

}  // namespace strata::quant
