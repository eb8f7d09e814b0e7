#pragma once
// Internal: how the kernel families register themselves with the dispatcher. Each family
// (float, legacy, kquants, iquants, mxfp4) provides one fill function per instruction set, defined
// in the file compiled for that set (e.g. kquants_avx2.cpp defines fill_kquants_avx2).

#include <array>

#include "quant/quant.h"

namespace strata::quant {

constexpr size_t kMaxTypeId = 40;

struct KernelTable {
  std::array<TypeKernels, kMaxTypeId> by_type{};
  TypeKernels& operator[](GgmlType t) { return by_type[static_cast<size_t>(t)]; }
  const TypeKernels& operator[](GgmlType t) const { return by_type[static_cast<size_t>(t)]; }
};

// Scalar references: always present, the ground truth the faster levels are tested against.
void fill_float_scalar(KernelTable& table);
void fill_legacy_scalar(KernelTable& table);
void fill_kquants_scalar(KernelTable& table);
void fill_iquants_scalar(KernelTable& table);
// A family's scalar quantizer of `type` with each value's squared error weighted
// (quantize_row_weighted in quant.h); null where the family has none for the type.
using WeightedQuantizeFn = void (*)(const float* src, void* dst, int64_t n, const float* weights);
WeightedQuantizeFn kquant_weighted_quantizer(GgmlType type);
WeightedQuantizeFn iquant_weighted_quantizer(GgmlType type);
WeightedQuantizeFn legacy_weighted_quantizer(GgmlType type);
void fill_mxfp4_scalar(KernelTable& table);

// AVX2 + FMA + F16C.
void fill_float_avx2(KernelTable& table);
void fill_legacy_avx2(KernelTable& table);
void fill_kquants_avx2(KernelTable& table);
void fill_iquants_avx2(KernelTable& table);
void fill_mxfp4_avx2(KernelTable& table);

// AVX-512 F/BW/VL/DQ + VNNI.
void fill_float_avx512(KernelTable& table);
void fill_legacy_avx512(KernelTable& table);
void fill_kquants_avx512(KernelTable& table);
void fill_iquants_avx512(KernelTable& table);
void fill_mxfp4_avx512(KernelTable& table);
// Tile GEMMs (TypeKernels::gemm) of the formats that have one.
void fill_gemm_avx512(KernelTable& table);
// Only called when the CPU also has AVX512_BF16.
void fill_float_avx512bf16(KernelTable& table);

}  // namespace strata::quant
