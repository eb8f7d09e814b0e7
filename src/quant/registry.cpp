// The dispatcher: builds one kernel table per instruction-set level from the family fill
// functions, and resolves each supported type to the best kernels this CPU can run.

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string>

#include "quant/kernel_table.h"
#include "util/cpu_features.h"
#include "util/error.h"

namespace strata::quant {
namespace {

struct Partner {
  GgmlType type;
  GgmlType activation;
};

// Every type strata computes with, and the activation format its dot product expects.
constexpr Partner kSupported[] = {
    {GgmlType::F32, GgmlType::F32},     {GgmlType::F16, GgmlType::F16},
    {GgmlType::BF16, GgmlType::BF16},   {GgmlType::Q4_0, GgmlType::Q8_0},
    {GgmlType::Q4_1, GgmlType::Q8_1},   {GgmlType::Q5_0, GgmlType::Q8_0},
    {GgmlType::Q5_1, GgmlType::Q8_1},   {GgmlType::Q8_0, GgmlType::Q8_0},
    {GgmlType::Q8_1, GgmlType::Q8_1},   {GgmlType::Q2_K, GgmlType::Q8_K},
    {GgmlType::Q3_K, GgmlType::Q8_K},   {GgmlType::Q4_K, GgmlType::Q8_K},
    {GgmlType::Q5_K, GgmlType::Q8_K},   {GgmlType::Q6_K, GgmlType::Q8_K},
    {GgmlType::Q8_K, GgmlType::Q8_K},   {GgmlType::IQ4_NL, GgmlType::Q8_0},
    {GgmlType::IQ4_XS, GgmlType::Q8_K}, {GgmlType::MXFP4, GgmlType::Q8_0},
};

struct Registry {
  KernelTable levels[kIsaCount];
  std::vector<TypeTraits> traits;  // indexed by type id; name empty when unsupported
  Isa best = Isa::scalar;

  Registry() {
    for (auto fill : {fill_float_scalar, fill_legacy_scalar, fill_kquants_scalar,
                      fill_iquants_scalar, fill_mxfp4_scalar})
      fill(levels[0]);
    for (auto fill :
         {fill_float_avx2, fill_legacy_avx2, fill_kquants_avx2, fill_iquants_avx2, fill_mxfp4_avx2})
      fill(levels[1]);
    for (auto fill : {fill_float_avx512, fill_legacy_avx512, fill_kquants_avx512,
                      fill_iquants_avx512, fill_mxfp4_avx512, fill_gemm_avx512})
      fill(levels[2]);
    const CpuFeatures& cpu = cpu_features();
    if (cpu.has_avx512_level() && cpu.avx512bf16) fill_float_avx512bf16(levels[2]);
    if (cpu.has_avx2_level()) best = Isa::avx2;
    if (cpu.has_avx512_level()) best = Isa::avx512;
    // STRATA_ISA=scalar|avx2 caps the level (A/B runs of the kernels on one machine).
    if (const char* cap = std::getenv("STRATA_ISA"); cap && *cap) {
      const std::string c = cap;
      STRATA_CHECK(c == "scalar" || c == "avx2" || c == "avx512",
                   "STRATA_ISA={}: expected scalar, avx2 or avx512", c);
      const Isa limit = c == "scalar" ? Isa::scalar : c == "avx2" ? Isa::avx2 : Isa::avx512;
      best = std::min(best, limit);
    }

    traits.resize(kMaxTypeId);
    for (const Partner& p : kSupported) {
      const GgmlTypeInfo& info = ggml_type_info(p.type);
      TypeTraits t{p.type,       info.name, info.block_elems, info.block_bytes,
                   p.activation, {},        Isa::scalar};
      t.kernels = resolve(p.type, best, &t.vec_dot_isa);
      traits[static_cast<size_t>(p.type)] = t;
    }
  }

  TypeKernels resolve(GgmlType type, Isa isa, Isa* vec_dot_isa = nullptr) const {
    TypeKernels out;
    for (int level = static_cast<int>(isa); level >= 0; --level) {
      const TypeKernels& k = levels[level][type];
      if (!out.dequantize_row) out.dequantize_row = k.dequantize_row;
      if (!out.quantize_row) out.quantize_row = k.quantize_row;
      if (!out.vec_dot && k.vec_dot) {
        out.vec_dot = k.vec_dot;
        if (vec_dot_isa) *vec_dot_isa = static_cast<Isa>(level);
      }
      // A multi-row kernel or GEMV is used only from the same level as the single dot product, so
      // they always agree on the arithmetic.
      if (!out.vec_dot_multi && k.vec_dot_multi && out.vec_dot == k.vec_dot) {
        out.vec_dot_multi = k.vec_dot_multi;
      }
      if (!out.gemv && k.gemv && out.vec_dot == k.vec_dot) out.gemv = k.gemv;
      if (!out.gemm) {
        out.gemm = k.gemm;
        out.packed = k.packed;  // from the same kernels as gemm: the same tiles
        out.compact = k.compact;
      }
    }
    return out;
  }
};

const Registry& registry() {
  static const Registry r;
  return r;
}

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar:
      return "scalar";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
  }
  return "?";
}

bool is_supported(GgmlType type) {
  const size_t id = static_cast<size_t>(type);
  return id < kMaxTypeId && !registry().traits[id].name.empty();
}

std::vector<GgmlType> supported_types() {
  std::vector<GgmlType> out;
  for (const Partner& p : kSupported) out.push_back(p.type);
  return out;
}

const TypeTraits& traits(GgmlType type) {
  if (!is_supported(type)) {
    std::string names;
    for (const Partner& p : kSupported) {
      if (!names.empty()) names += ", ";
      names += ggml_type_name(p.type);
    }
    const auto info = ggml_type_info(static_cast<uint32_t>(type));
    fail("tensor type {} is not supported by strata (supported: {})",
         info ? std::string(info->name) : fmt::format("id {}", static_cast<uint32_t>(type)), names);
  }
  return registry().traits[static_cast<size_t>(type)];
}

Isa best_isa() {
  return registry().best;
}

std::vector<Isa> available_isas() {
  std::vector<Isa> out;
  for (int level = 0; level <= static_cast<int>(best_isa()); ++level)
    out.push_back(static_cast<Isa>(level));
  return out;
}

TypeKernels kernels_exact(GgmlType type, Isa isa) {
  return registry().levels[static_cast<int>(isa)][type];
}

TypeKernels kernels_at(GgmlType type, Isa isa) {
  return registry().resolve(type, isa);
}

int64_t row_bytes(GgmlType type, int64_t n) {
  const GgmlTypeInfo& info = ggml_type_info(type);
  return ggml_row_bytes(info, n);
}

namespace {

WeightedQuantizeFn weighted_quantizer(GgmlType type) {
  for (auto family :
       {kquant_weighted_quantizer, iquant_weighted_quantizer, legacy_weighted_quantizer}) {
    if (const WeightedQuantizeFn quantize = family(type)) return quantize;
  }
  return nullptr;
}

}  // namespace

bool has_weighted_search(GgmlType type) {
  return weighted_quantizer(type) != nullptr;
}

bool quantize_row_weighted(GgmlType type, const float* src, void* dst, int64_t n,
                           const float* weights) {
  const WeightedQuantizeFn quantize = weighted_quantizer(type);
  if (!quantize) return false;
  quantize(src, dst, n, weights);
  return true;
}

}  // namespace strata::quant
