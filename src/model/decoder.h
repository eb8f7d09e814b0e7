#pragma once
// Pieces every decoder shares: token embedding lookup, residual adds, the final norm + output
// head, the blocks' parameters from the hyper-parameters.

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "model/blocks.h"
#include "model/hparams.h"
#include "model/layer_spec.h"
#include "model/layer_weights.h"
#include "model/weight_loader.h"
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
                 const float* x, std::span<const int32_t> rows, float* logits, BlockWorkspace& ws,
                 ThreadPool& pool);

// Applies rms_norm(row) * weight to each of n rows of `cols` values (out may be x).
void rms_norm_rows(const float* x, const float* weight, float* out, int64_t n, int64_t cols,
                   float eps);

// Warns about each tensor no declaration used, except those of the `skipped` blocks after
// hp.n_layer (a multi-token-prediction block, not used for plain decoding: counted in one line).
void warn_unused_tensors(const WeightLoader& loader, const std::string& file_name,
                         const ModelHParams& hp, int64_t skipped);

AttentionParams attention_params(const ModelHParams& hp, const ops::Rope& rope);
MoeParams moe_params(const ModelHParams& hp);

// The two halves of a layer as its spec says, on n rows already normed (the caller norms and
// adds the residual): attention with the layer's window and gated query (params: the model's,
// from attention_params), and the FFN, routed experts or dense.
void attention_mixer(const LayerWeights& l, const LayerSpec& spec, AttentionParams params,
                     const float* normed, int64_t n, const TokenPlacement& at, float* out,
                     BlockWorkspace& ws, ThreadPool& pool);
void ffn_mixer(const LayerWeights& l, const LayerSpec& spec, const MoeParams& moe,
               const float* normed, int64_t n, float* out, BlockWorkspace& ws, ThreadPool& pool);

// Sum of the bytes of the given matrices.
int64_t matrix_bytes(std::initializer_list<const ops::WeightMatrix*> matrices);

}  // namespace strata
