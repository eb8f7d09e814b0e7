// Tile GEMMs of the quad formats (Q8_0, Q4_0, IQ4_NL, MXFP4) with Q8_0 activations (AVX-512
// VNNI); the format is GemmQuad (gemm_quad_avx512.h).

#include "quant/gemm_quad_avx512.h"

#include "quant/gemm_avx512.h"
#include "quant/kernel_table.h"

namespace strata::quant {

void fill_gemm_quads_avx512(KernelTable& table) {
  set_tile_kernels<GemmQuad<Q8_0Quads>>(table[GgmlType::Q8_0]);
  set_tile_kernels<GemmQuad<NibbleQuads<Q4_0Values>>>(table[GgmlType::Q4_0]);
  set_tile_kernels<GemmQuad<NibbleQuads<Iq4nlValues>>>(table[GgmlType::IQ4_NL]);
  set_tile_kernels<GemmQuad<NibbleQuads<Mxfp4Values>>>(table[GgmlType::MXFP4]);
}

}  // namespace strata::quant
