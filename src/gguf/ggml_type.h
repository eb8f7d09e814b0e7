#pragma once
// The tensor element types a GGUF file can declare (the ggml type ids), with their block geometry.
// Only geometry lives here; the quant layer adds the kernels for the types strata computes with.

#include <cstdint>
#include <optional>
#include <string_view>

namespace strata {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

struct GgmlTypeInfo {
  GgmlType type;
  std::string_view name;  // as GGUF tools print it, e.g. "Q4_K"
  int64_t block_elems;    // elements per block (1 for plain types)
  int64_t block_bytes;    // bytes per block
};

// Geometry of a type id read from a file; nullopt for ids no known tool writes.
std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id);
const GgmlTypeInfo& ggml_type_info(GgmlType type);
std::string_view ggml_type_name(GgmlType type);
std::optional<GgmlType> ggml_type_from_name(std::string_view name);  // case-insensitive

// Bytes of a row of n elements; n must be a multiple of the block size (checked by callers).
inline int64_t ggml_row_bytes(const GgmlTypeInfo& info, int64_t n) {
  return n / info.block_elems * info.block_bytes;
}

}  // namespace strata
