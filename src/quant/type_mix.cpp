#include "quant/type_mix.h"

#include <fmt/format.h>

#include "quant/quant.h"
#include "util/error.h"

namespace strata::quant {
namespace {

struct FileType {
  const char* name;
  uint32_t id;        // general.file_type
  GgmlType base;      // the weight type most matrices get
  const char* alias;  // another name GGUF tools accept for it, or ""
};

constexpr FileType kFileTypes[] = {
    {"F32", 0, GgmlType::F32, ""},          {"F16", 1, GgmlType::F16, ""},
    {"Q4_0", 2, GgmlType::Q4_0, ""},        {"Q4_1", 3, GgmlType::Q4_1, ""},
    {"Q5_0", 8, GgmlType::Q5_0, ""},        {"Q5_1", 9, GgmlType::Q5_1, ""},
    {"Q8_0", 7, GgmlType::Q8_0, ""},        {"Q2_K", 10, GgmlType::Q2_K, ""},
    {"Q3_K_S", 11, GgmlType::Q3_K, ""},     {"Q3_K_M", 12, GgmlType::Q3_K, "Q3_K"},
    {"Q3_K_L", 13, GgmlType::Q3_K, ""},     {"Q4_K_S", 14, GgmlType::Q4_K, ""},
    {"Q4_K_M", 15, GgmlType::Q4_K, "Q4_K"}, {"Q5_K_S", 16, GgmlType::Q5_K, ""},
    {"Q5_K_M", 17, GgmlType::Q5_K, "Q5_K"}, {"Q6_K", 18, GgmlType::Q6_K, ""},
    {"IQ4_NL", 25, GgmlType::IQ4_NL, ""},   {"IQ4_XS", 30, GgmlType::IQ4_XS, ""},
    {"MXFP4_MOE", 38, GgmlType::MXFP4, ""}};

const FileType* find_file_type(std::string_view name) {
  for (const FileType& f : kFileTypes) {
    if (name == f.name || name == f.alias) return &f;
  }
  return nullptr;
}

// Rows that are no whole number of the type's blocks (gpt-oss's 2880 values, GLM-4.5-Air's expert
// down rows of 1408) get the type GGUF quantizers fall back to, of 32-value blocks.
GgmlType fit_rows(GgmlType t, int64_t cols) {
  if (cols % ggml_type_info(t).block_elems == 0) return t;
  switch (t) {
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
      t = GgmlType::Q4_0;
      break;
    case GgmlType::Q4_K:
      t = GgmlType::Q5_0;
      break;
    case GgmlType::Q5_K:
      t = GgmlType::Q5_1;
      break;
    case GgmlType::Q6_K:
      t = GgmlType::Q8_0;
      break;
    default:
      t = GgmlType::IQ4_NL;
      break;
  }
  return cols % ggml_type_info(t).block_elems == 0 ? t : GgmlType::F16;
}

// The layers whose V and down projections a _M mix gives more bits: the first and last eighth and
// every third one between.
bool more_bits(int64_t layer, int64_t n) {
  return layer < n / 8 || layer >= 7 * n / 8 || (layer - n / 8) % 3 == 2;
}

// The mix's choice for a quantized file type (before fitting the rows).
GgmlType mixed_type(const FileType& f, const MatrixRole& m) {
  const std::string_view ft = f.name;
  const std::string& role = m.role;
  const int64_t layer = m.layer, n = m.n_layer;
  const bool eight_experts = m.n_expert == 8;
  if (role == "output" || (role == "token_embd" && m.tied_output)) {
    if (ft == "MXFP4_MOE" || m.cols % ggml_type_info(f.base).block_elems != 0)
      return GgmlType::Q8_0;
    return f.base == GgmlType::Q8_0 ? GgmlType::Q8_0 : GgmlType::Q6_K;
  }
  if (ft == "MXFP4_MOE") return m.routed_expert ? GgmlType::MXFP4 : GgmlType::Q8_0;
  if (role == "token_embd") return f.base;
  // V-like projections (V, and Gated DeltaNet's fused qkv), counted in the file's layer order.
  if (role == "attn_v" || role == "attn_qkv") {
    const int64_t v = m.v_index >= 0 ? m.v_index : layer, n_v = m.v_index >= 0 ? m.n_v : n;
    GgmlType t = f.base;
    if (ft == "Q2_K") {
      t = m.n_gqa >= 4 ? GgmlType::Q4_K : GgmlType::Q3_K;
    } else if (ft == "Q3_K_M") {
      t = v < 2 ? GgmlType::Q5_K : GgmlType::Q4_K;
    } else if (ft == "Q3_K_L") {
      t = GgmlType::Q5_K;
    } else if ((ft == "IQ4_NL" || ft == "IQ4_XS") && m.n_gqa >= 4) {
      t = GgmlType::Q5_K;
    } else if ((ft == "Q4_K_M" || ft == "Q5_K_M") && more_bits(v, n_v)) {
      t = GgmlType::Q6_K;
    } else if (ft == "Q4_K_S" && v < 4) {
      t = GgmlType::Q5_K;
    }
    return eight_experts ? GgmlType::Q8_0 : t;
  }
  if (role == "attn_k") return eight_experts ? GgmlType::Q8_0 : f.base;
  if (role == "ffn_down") {
    if (ft == "Q2_K") return GgmlType::Q3_K;
    if (ft == "Q3_K_M") return layer < n / 16 ? GgmlType::Q5_K : GgmlType::Q4_K;
    if (ft == "Q3_K_L") return GgmlType::Q5_K;
    if ((ft == "Q4_K_M" || ft == "Q5_K_M") && more_bits(layer, n)) return GgmlType::Q6_K;
    // (Without an importance matrix.)
    if ((ft == "IQ4_NL" || ft == "IQ4_XS") && layer < n / 8) return GgmlType::Q5_K;
    if (ft == "Q4_K_S" && layer < n / 8) return GgmlType::Q5_K;
    return f.base;
  }
  if (role == "attn_output") {
    if (eight_experts) {
      const bool to_q5_k = ft == "Q2_K" || ft == "Q3_K_S" || ft == "Q3_K_M" || ft == "Q4_K_S" ||
                           ft == "Q4_K_M" || ft == "IQ4_NL" || ft == "IQ4_XS";
      return to_q5_k ? GgmlType::Q5_K : f.base;
    }
    if (ft == "Q2_K") return GgmlType::Q3_K;
    if (ft == "Q3_K_M") return GgmlType::Q4_K;
    if (ft == "Q3_K_L") return GgmlType::Q5_K;
    return f.base;
  }
  return f.base;
}

}  // namespace

GgmlType matrix_type(std::string_view file_type, const MatrixRole& m, bool pure) {
  const FileType* f = find_file_type(file_type);
  if (!f || !(f->base == GgmlType::F32 || f->base == GgmlType::F16 ||
              (is_supported(f->base) && traits(f->base).kernels.vec_dot)))
    fail("unknown or unsupported file type '{}' (one of {})", file_type, file_type_names());
  const bool quantized = ggml_type_info(f->base).block_elems > 1;
  if (pure || !quantized) return quantized ? fit_rows(f->base, m.cols) : f->base;
  return fit_rows(mixed_type(*f, m), m.cols);
}

uint32_t gguf_file_type(std::string_view file_type) {
  const FileType* f = find_file_type(file_type);
  return f ? f->id : 0;
}

std::string file_type_names() {
  std::string out;
  for (const FileType& f : kFileTypes) out += (out.empty() ? "" : ", ") + std::string(f.name);
  return out;
}

}  // namespace strata::quant
