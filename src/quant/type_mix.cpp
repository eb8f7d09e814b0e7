#include "quant/type_mix.h"

#include <fmt/format.h>

#include <utility>

#include "quant/quant.h"
#include "util/error.h"

namespace strata::quant {
namespace {

constexpr std::pair<const char*, uint32_t> kFileTypes[] = {
    {"F32", 0},   {"F16", 1},     {"Q4_0", 2},    {"Q4_1", 3},  {"Q8_0", 7},      {"Q5_0", 8},
    {"Q5_1", 9},  {"Q2_K", 10},   {"Q3_K", 11},   {"Q4_K", 14}, {"Q4_K_M", 15},   {"Q5_K", 16},
    {"Q6_K", 18}, {"IQ4_NL", 25}, {"IQ4_XS", 30}, {"BF16", 32}, {"MXFP4_MOE", 38}};

// The type the file type asks for, before the block-size fallback.
GgmlType wanted_type(std::string_view ftype, const MatrixRole& m) {
  if (ftype == "MXFP4_MOE") return m.routed_expert ? GgmlType::MXFP4 : GgmlType::Q8_0;
  if (ftype != "Q4_K_M") {
    const auto t = ggml_type_from_name(std::string(ftype));
    if (!t || !(*t == GgmlType::F32 || *t == GgmlType::F16 ||
                (is_supported(*t) && traits(*t).kernels.vec_dot))) {
      fail("unknown or unsupported file type '{}' (one of {})", ftype, file_type_names());
    }
    if (m.role == "output" && (*t == GgmlType::Q2_K || *t == GgmlType::Q3_K)) return GgmlType::Q6_K;
    return *t;
  }
  // The K-quant mix of a Q4_K_M file as GGUF quantizers make it: more bits where errors hurt
  // most (output head, V projections, some down projections), 8 bits for the tiny K/V matrices
  // of MoE models.
  const int64_t n = m.n_layer, layer = m.layer;
  const bool more_bits = layer < n / 8 || layer >= 7 * n / 8 || (layer - n / 8) % 3 == 2;
  if (m.role == "output") return GgmlType::Q6_K;
  if (m.role == "attn_k") return m.moe ? GgmlType::Q8_0 : GgmlType::Q4_K;
  if (m.role == "attn_v") {
    return m.moe ? GgmlType::Q8_0 : (more_bits ? GgmlType::Q6_K : GgmlType::Q4_K);
  }
  if (m.role == "attn_output") return m.moe ? GgmlType::Q5_K : GgmlType::Q4_K;
  if (m.role == "ffn_down") return more_bits ? GgmlType::Q6_K : GgmlType::Q4_K;
  if (m.role == "attn_qkv") return GgmlType::Q8_0;  // as GGUF quantizers treat GDN's qkv
  return GgmlType::Q4_K;
}

// Rows of 2880 (gpt-oss) or 1408 (GLM-4.5-Air expert down) values are no whole number of
// 256-value blocks: GGUF quantizers then pick a type of 32-value blocks.
GgmlType fit_rows(GgmlType t, int64_t cols) {
  if (cols % ggml_type_info(t).block_elems == 0) return t;
  switch (t) {
    case GgmlType::Q4_K:
      t = GgmlType::Q5_0;
      break;
    case GgmlType::Q5_K:
      t = GgmlType::Q5_1;
      break;
    case GgmlType::Q6_K:
    case GgmlType::Q8_K:
      t = GgmlType::Q8_0;
      break;
    default:
      t = GgmlType::IQ4_NL;
      break;
  }
  return cols % ggml_type_info(t).block_elems == 0 ? t : GgmlType::F16;
}

}  // namespace

GgmlType matrix_type(std::string_view file_type, const MatrixRole& m) {
  return fit_rows(wanted_type(file_type, m), m.cols);
}

GgmlType quantized_matrix_type(std::string_view file_type, const MatrixRole& m) {
  const GgmlType t = matrix_type(file_type, m);
  const auto single = ggml_type_from_name(std::string(file_type));
  if (!single || *single == GgmlType::F32 || *single == GgmlType::F16 || *single == GgmlType::Q8_0)
    return t;
  if (m.role == "output") return fit_rows(GgmlType::Q6_K, m.cols);
  if (m.moe && (m.role == "attn_k" || m.role == "attn_v")) return fit_rows(GgmlType::Q8_0, m.cols);
  // A MoE model's attention output in Q5_K under the K-quant and IQ4 types below it.
  const bool k_or_iq4 = *single == GgmlType::Q2_K || *single == GgmlType::Q3_K ||
                        *single == GgmlType::Q4_K || *single == GgmlType::IQ4_NL ||
                        *single == GgmlType::IQ4_XS;
  if (m.moe && m.role == "attn_output" && k_or_iq4) return fit_rows(GgmlType::Q5_K, m.cols);
  return t;
}

uint32_t gguf_file_type(std::string_view file_type) {
  for (const auto& [name, id] : kFileTypes) {
    if (file_type == name) return id;
  }
  return 0;
}

std::string file_type_names() {
  std::string out;
  for (const auto& [name, id] : kFileTypes) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

}  // namespace strata::quant
