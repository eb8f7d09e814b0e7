#include "gguf/ggml_type.h"

#include <array>
#include <cctype>

#include "util/error.h"

namespace strata {
namespace {

constexpr std::array kTypes = {
    GgmlTypeInfo{GgmlType::F32, "F32", 1, 4},
    GgmlTypeInfo{GgmlType::F16, "F16", 1, 2},
    GgmlTypeInfo{GgmlType::Q4_0, "Q4_0", 32, 18},
    GgmlTypeInfo{GgmlType::Q4_1, "Q4_1", 32, 20},
    GgmlTypeInfo{GgmlType::Q5_0, "Q5_0", 32, 22},
    GgmlTypeInfo{GgmlType::Q5_1, "Q5_1", 32, 24},
    GgmlTypeInfo{GgmlType::Q8_0, "Q8_0", 32, 34},
    GgmlTypeInfo{GgmlType::Q8_1, "Q8_1", 32, 36},
    GgmlTypeInfo{GgmlType::Q2_K, "Q2_K", 256, 84},
    GgmlTypeInfo{GgmlType::Q3_K, "Q3_K", 256, 110},
    GgmlTypeInfo{GgmlType::Q4_K, "Q4_K", 256, 144},
    GgmlTypeInfo{GgmlType::Q5_K, "Q5_K", 256, 176},
    GgmlTypeInfo{GgmlType::Q6_K, "Q6_K", 256, 210},
    GgmlTypeInfo{GgmlType::Q8_K, "Q8_K", 256, 292},
    GgmlTypeInfo{GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66},
    GgmlTypeInfo{GgmlType::IQ2_XS, "IQ2_XS", 256, 74},
    GgmlTypeInfo{GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98},
    GgmlTypeInfo{GgmlType::IQ1_S, "IQ1_S", 256, 50},
    GgmlTypeInfo{GgmlType::IQ4_NL, "IQ4_NL", 32, 18},
    GgmlTypeInfo{GgmlType::IQ3_S, "IQ3_S", 256, 110},
    GgmlTypeInfo{GgmlType::IQ2_S, "IQ2_S", 256, 82},
    GgmlTypeInfo{GgmlType::IQ4_XS, "IQ4_XS", 256, 136},
    GgmlTypeInfo{GgmlType::I8, "I8", 1, 1},
    GgmlTypeInfo{GgmlType::I16, "I16", 1, 2},
    GgmlTypeInfo{GgmlType::I32, "I32", 1, 4},
    GgmlTypeInfo{GgmlType::I64, "I64", 1, 8},
    GgmlTypeInfo{GgmlType::F64, "F64", 1, 8},
    GgmlTypeInfo{GgmlType::IQ1_M, "IQ1_M", 256, 56},
    GgmlTypeInfo{GgmlType::BF16, "BF16", 1, 2},
    GgmlTypeInfo{GgmlType::TQ1_0, "TQ1_0", 256, 54},
    GgmlTypeInfo{GgmlType::TQ2_0, "TQ2_0", 256, 66},
    GgmlTypeInfo{GgmlType::MXFP4, "MXFP4", 32, 17},
};

bool equal_ignore_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::toupper(static_cast<unsigned char>(a[i])) !=
        std::toupper(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

}  // namespace

std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id) {
  for (const auto& info : kTypes) {
    if (static_cast<uint32_t>(info.type) == id) return info;
  }
  return std::nullopt;
}

const GgmlTypeInfo& ggml_type_info(GgmlType type) {
  for (const auto& info : kTypes) {
    if (info.type == type) return info;
  }
  fail("unknown ggml type id {}", static_cast<uint32_t>(type));
}

std::string_view ggml_type_name(GgmlType type) {
  return ggml_type_info(type).name;
}

std::optional<GgmlType> ggml_type_from_name(std::string_view name) {
  for (const auto& info : kTypes) {
    if (equal_ignore_case(info.name, name)) return info.type;
  }
  return std::nullopt;
}

}  // namespace strata
