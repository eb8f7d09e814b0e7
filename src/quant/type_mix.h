#pragma once
// The weight type each matrix gets in a file of a given type, named as GGUF tools name file types:
// a mix (Q4_K_M: more bits where errors hurt most; MXFP4_MOE: routed experts in MXFP4, the rest
// Q8_0) or one type for every matrix (F16, Q8_0, ...; `pure`). The mixes follow the rules of
// llama.cpp's quantizer (llama-quant.cpp), checked against files it made (the oracle's); shared
// by `strata quantize` and the synthetic-model generator, so both make the files GGUF tools make.

#include <cstdint>
#include <string>
#include <string_view>

#include "gguf/ggml_type.h"

namespace strata::quant {

struct MatrixRole {
  std::string role;    // base name without _exps / _shexp: "ffn_down", "attn_v", "output", ...
  int64_t layer = -1;  // -1: not in a layer (output, token_embd)
  int64_t n_layer = 0;
  int64_t cols = 0;  // row length
  bool routed_expert = false;
  int64_t n_expert = 0;      // the model's routed experts (8-expert models get more bits in K/V)
  int64_t n_gqa = 1;         // query heads per KV head
  bool tied_output = false;  // the file has no output head: token_embd is it
  // Of V-like matrices (attn_v, attn_qkv) in layer order: this one's place and how many there are
  // (-1: the layer and the layer count stand in).
  int64_t v_index = -1, n_v = 0;
};

// The mix's type for the matrix; `pure`: the file type's own weight type for every matrix (where
// its blocks fit the rows). Throws strata::Error naming the file types it knows for an unknown one.
GgmlType matrix_type(std::string_view file_type, const MatrixRole& m, bool pure = false);

// general.file_type as GGUF tools number it (0 for a name it does not know).
uint32_t gguf_file_type(std::string_view file_type);

// "Q4_K_M, MXFP4_MOE, Q8_0, ..." for messages and help.
std::string file_type_names();

}  // namespace strata::quant
