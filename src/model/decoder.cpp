#include "model/decoder.h"

#include <algorithm>
#include <vector>

#include "model/tensor_role.h"
#include "ops/rms_norm.h"
#include "quant/quant.h"
#include "util/error.h"
#include "util/log.h"

namespace strata {

void check_token_ids(std::span<const int32_t> tokens, int64_t n_vocab) {
  for (size_t t = 0; t < tokens.size(); ++t) {
    STRATA_CHECK(tokens[t] >= 0 && tokens[t] < n_vocab,
                 "token id {} at position {} is outside the vocabulary (0..{})", tokens[t], t,
                 n_vocab - 1);
  }
}

void embed_tokens(const ops::WeightMatrix& token_embd, std::span<const int32_t> tokens, float* x) {
  check_token_ids(tokens, token_embd.rows);
  const quant::DequantizeRowFn dequantize = quant::traits(token_embd.type).kernels.dequantize_row;
  for (size_t t = 0; t < tokens.size(); ++t) {
    dequantize(token_embd.row(tokens[t]), x + static_cast<int64_t>(t) * token_embd.cols,
               token_embd.cols);
  }
}

void add_residual(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void rms_norm_rows(const float* x, const float* weight, float* out, int64_t n, int64_t cols,
                   float eps) {
  ops::rms_norm_rows(x, weight, out, n, cols, eps);
}

void output_head(const ops::WeightMatrix& output, const float* output_norm, float rms_eps,
                 const float* x, std::span<const int32_t> rows, float* logits, BlockWorkspace& ws,
                 ThreadPool& pool) {
  if (rows.empty()) return;
  const int64_t cols = output.cols;
  std::vector<float>& normed = ws.head_normed;
  normed.resize(rows.size() * static_cast<size_t>(cols));
  // The rows gathered, then normed in place together (the norm's rows share its passes).
  for (size_t i = 0; i < rows.size(); ++i) {
    std::copy(x + rows[i] * cols, x + (rows[i] + 1) * cols,
              normed.data() + static_cast<int64_t>(i) * cols);
  }
  ops::rms_norm_rows(normed.data(), output_norm, normed.data(), static_cast<int64_t>(rows.size()),
                     cols, rms_eps);
  ops::QuantizedRows& activations = ws.head_input;
  activations.quantize(normed.data(), static_cast<int64_t>(rows.size()), cols, cols,
                       quant::traits(output.type).activation_type);
  ops::matmul(output, activations, logits, output.rows, pool, ws.matmul);
}

}  // namespace strata

namespace strata {

void warn_unused_tensors(const WeightLoader& loader, const std::string& file_name,
                         const ModelHParams& hp, int64_t skipped) {
  int64_t not_loaded = 0;
  for (const std::string& name : loader.unused()) {
    const std::optional<int> layer = tensor_layer(name);
    if (layer && *layer >= hp.n_layer && *layer < hp.n_layer + skipped) {
      ++not_loaded;
      continue;
    }
    log::warn("{}: tensor '{}' is not used by the {} architecture", file_name, name, hp.arch);
  }
  if (not_loaded > 0) {
    log::info("{}: {} tensors of the multi-token-prediction block are not loaded", file_name,
              not_loaded);
  }
}

AttentionParams attention_params(const ModelHParams& hp, const ops::Rope& rope) {
  AttentionParams p;
  p.n_head = hp.n_head;
  p.n_head_kv = hp.n_head_kv;
  p.head_dim = hp.head_dim;
  p.rms_eps = hp.rms_eps;
  p.rope = &rope;
  return p;
}

void attention_mixer(const LayerWeights& l, const LayerSpec& spec, AttentionParams params,
                     const float* normed, int64_t n, const TokenPlacement& at, float* out,
                     BlockWorkspace& ws, ThreadPool& pool) {
  params.sliding_window = spec.window;
  params.output_gate = spec.attention.gated_q;
  attention_block(l.attn, params, normed, n, at, out, ws, pool);
}

void ffn_mixer(const LayerWeights& l, const LayerSpec& spec, const MoeParams& moe,
               const float* normed, int64_t n, float* out, BlockWorkspace& ws, ThreadPool& pool) {
  if (spec.moe) {
    moe_ffn_block(l.moe, moe, normed, n, out, ws, pool);
  } else {
    dense_ffn_block(l.dense, normed, n, out, ws, pool);
  }
}

MoeParams moe_params(const ModelHParams& hp) {
  MoeParams p;
  p.n_expert = hp.n_expert;
  p.n_expert_used = hp.n_expert_used;
  p.n_ff_exp = hp.n_ff_exp;
  p.renormalize = hp.expert_weights_norm;
  p.gating = hp.expert_gating;
  p.weights_scale = hp.expert_weights_scale;
  p.activation = hp.expert_activation;
  return p;
}

int64_t matrix_bytes(std::initializer_list<const ops::WeightMatrix*> matrices) {
  int64_t total = 0;
  for (const ops::WeightMatrix* m : matrices) total += m->data ? m->bytes() : 0;
  return total;
}

}  // namespace strata
