#pragma once
// Pieces every decoder architecture shares: token embedding lookup, residual adds and the final
// norm + output head.

#include <cstdint>
#include <span>

#include "ops/matmul.h"
#include "util/thread_pool.h"

namespace strata {

// x[t] = embedding row of tokens[t]; throws naming the token when it is out of range.
// Throws naming the first token id outside [0, n_vocab) and its position in the batch.
void check_token_ids(std::span<const int32_t> tokens, int64_t n_vocab);

void embed_tokens(const ops::WeightMatrix& token_embd, std::span<const int32_t> tokens, float* x);

// x += y over n values.
void add_residual(float* x, const float* y, int64_t n);

// logits[i] = output(rms_norm(x[rows[i]]) * norm): only the rows someone samples from pay for
// the (large) output matrix.
void output_head(const ops::WeightMatrix& output, const float* output_norm, float rms_eps,
                 const float* x, std::span<const int32_t> rows, float* logits, ThreadPool& pool);

// Applies rms_norm(row) * weight to each of n rows of `cols` values (out may be x).
void rms_norm_rows(const float* x, const float* weight, float* out, int64_t n, int64_t cols,
                   float eps);

}  // namespace strata

#include "model/blocks.h"
#include "model/hparams.h"
#include "model/weight_loader.h"

namespace strata {

// "blk.{layer}.{name}.weight", and "blk.{layer}.{name}.bias".
std::string layer_tensor(int64_t layer, const char* name);
std::string layer_bias(int64_t layer, const char* name);

// The optional parts of an architecture's attention, declared (and so required) when set.
struct AttentionLayout {
  enum class QkNorm { none, required, optional };
  QkNorm qk_norm = QkNorm::none;  // per-head RMSNorm of q and k
  bool gated_q = false;           // a query projection of twice the size: query and gate per head
  bool qkv_bias = false;          // attn_{q,k,v}.bias
  bool output_bias = false;       // attn_output.bias
  bool sinks = false;             // attn_sinks.weight [n_head]
};

// The optional parts of an architecture's MoE FFN.
struct MoeLayout {
  bool router_bias = false;     // ffn_gate_inp.bias
  bool expert_biases = false;   // ffn_{gate,up,down}_exps.bias
  bool selection_bias = false;  // exp_probs_b.bias (sigmoid gating's score correction)
  int64_t n_ff_shexp = 0;       // shared expert width (ffn_*_shexp); 0: none
};

AttentionWeights declare_attention(WeightLoader& loader, const ModelHParams& hp, int64_t layer,
                                   const AttentionLayout& layout);
DenseFfnWeights declare_dense_ffn(WeightLoader& loader, const ModelHParams& hp, int64_t layer);
// The shared expert's optional sigmoid gate (ffn_gate_inp_shexp) is taken when present.
MoeFfnWeights declare_moe_ffn(WeightLoader& loader, const ModelHParams& hp, int64_t layer,
                              const MoeLayout& layout = {});

// Warns about each tensor no declaration used, except those of the `skipped` blocks after
// hp.n_layer (a multi-token-prediction block, not used for plain decoding: counted in one line).
void warn_unused_tensors(const WeightLoader& loader, const std::string& file_name,
                         const ModelHParams& hp, int64_t skipped);

AttentionParams attention_params(const ModelHParams& hp, const ops::Rope& rope);
MoeParams moe_params(const ModelHParams& hp);

// Sum of the bytes of the given matrices.
int64_t matrix_bytes(std::initializer_list<const ops::WeightMatrix*> matrices);

}  // namespace strata
