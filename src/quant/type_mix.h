#pragma once
// The weight type each matrix gets in a file of a given type, named as GGUF tools name file types:
// one weight type for every matrix (Q8_0, IQ4_XS, ...), or a mix (Q4_K_M: more bits where errors
// hurt most; MXFP4_MOE: gpt-oss's routed experts in MXFP4, the rest Q8_0). Shared by
// `strata quantize` and the synthetic-model generator, so both make the files GGUF tools make.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/ggml_type.h"

namespace strata::quant {

struct MatrixRole {
  std::string role;    // base name without _exps / _shexp: "ffn_down", "attn_v", "output", ...
  int64_t layer = -1;  // -1: not in a layer (output, token_embd)
  int64_t n_layer = 0;
  int64_t cols = 0;  // row length
  bool routed_expert = false;
  bool moe = false;  // the model routes experts (the mix gives its small K/V matrices 8 bits)
};

// Throws strata::Error naming the file types it knows for an unknown one.
GgmlType matrix_type(std::string_view file_type, const MatrixRole& m);

// What `strata quantize` writes: matrix_type, and for a file of one weight type below eight bits
// what GGUF quantizers add to it (checked on the oracle's files): the output head in Q6_K, a MoE
// model's small K and V projections in Q8_0 and, under K-quant and IQ4 types below Q5_K, its
// attention output in Q5_K.
GgmlType quantized_matrix_type(std::string_view file_type, const MatrixRole& m);

// general.file_type as GGUF tools number it (0 for a name it does not know).
uint32_t gguf_file_type(std::string_view file_type);

// "Q4_K_M, MXFP4_MOE, Q8_0, ..." for messages and help.
std::string file_type_names();

}  // namespace strata::quant
