#include "model/decoder.h"

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
  for (int64_t t = 0; t < n; ++t) ops::rms_norm(x + t * cols, weight, out + t * cols, cols, eps);
}

void output_head(const ops::WeightMatrix& output, const float* output_norm, float rms_eps,
                 const float* x, std::span<const int32_t> rows, float* logits, ThreadPool& pool) {
  if (rows.empty()) return;
  const int64_t cols = output.cols;
  static thread_local std::vector<float> normed;
  normed.resize(rows.size() * static_cast<size_t>(cols));
  for (size_t i = 0; i < rows.size(); ++i) {
    ops::rms_norm(x + rows[i] * cols, output_norm, normed.data() + static_cast<int64_t>(i) * cols,
                  cols, rms_eps);
  }
  static thread_local ops::QuantizedRows activations;
  activations.quantize(normed.data(), static_cast<int64_t>(rows.size()), cols, cols,
                       quant::traits(output.type).activation_type);
  ops::matmul(output, activations, logits, output.rows, pool);
}

}  // namespace strata

namespace strata {

std::string layer_tensor(int64_t layer, const char* name) {
  return "blk." + std::to_string(layer) + "." + name + ".weight";
}

std::string layer_bias(int64_t layer, const char* name) {
  return "blk." + std::to_string(layer) + "." + name + ".bias";
}

AttentionWeights declare_attention(WeightLoader& loader, const ModelHParams& hp, int64_t layer,
                                   const AttentionLayout& layout) {
  AttentionWeights w;
  const int64_t q_dim = hp.n_head * hp.head_dim, kv_dim = hp.n_head_kv * hp.head_dim;
  w.wq =
      loader.matrix(layer_tensor(layer, "attn_q"), hp.n_embd, layout.gated_q ? 2 * q_dim : q_dim);
  w.wk = loader.matrix(layer_tensor(layer, "attn_k"), hp.n_embd, kv_dim);
  w.wv = loader.matrix(layer_tensor(layer, "attn_v"), hp.n_embd, kv_dim);
  w.wo = loader.matrix(layer_tensor(layer, "attn_output"), q_dim, hp.n_embd);
  using QkNorm = AttentionLayout::QkNorm;
  if (layout.qk_norm == QkNorm::required) {
    w.q_norm = loader.vector(layer_tensor(layer, "attn_q_norm"), hp.head_dim);
    w.k_norm = loader.vector(layer_tensor(layer, "attn_k_norm"), hp.head_dim);
  } else if (layout.qk_norm == QkNorm::optional) {
    w.q_norm = loader.optional_vector(layer_tensor(layer, "attn_q_norm"), hp.head_dim);
    w.k_norm = loader.optional_vector(layer_tensor(layer, "attn_k_norm"), hp.head_dim);
    STRATA_CHECK(!w.q_norm == !w.k_norm, "layer {}: attn_q_norm and attn_k_norm come in pairs",
                 layer);
  }
  if (layout.qkv_bias) {
    STRATA_CHECK(!layout.gated_q, "a query bias with a gated query projection is not supported");
    w.bq = loader.vector(layer_bias(layer, "attn_q"), q_dim);
    w.bk = loader.vector(layer_bias(layer, "attn_k"), kv_dim);
    w.bv = loader.vector(layer_bias(layer, "attn_v"), kv_dim);
  }
  if (layout.output_bias) w.bo = loader.vector(layer_bias(layer, "attn_output"), hp.n_embd);
  if (layout.sinks) w.sinks = loader.vector(layer_tensor(layer, "attn_sinks"), hp.n_head);
  return w;
}

DenseFfnWeights declare_dense_ffn(WeightLoader& loader, const ModelHParams& hp, int64_t layer) {
  STRATA_CHECK(hp.n_ff > 0, "{}.feed_forward_length is missing", hp.arch);
  return {loader.matrix(layer_tensor(layer, "ffn_gate"), hp.n_embd, hp.n_ff),
          loader.matrix(layer_tensor(layer, "ffn_up"), hp.n_embd, hp.n_ff),
          loader.matrix(layer_tensor(layer, "ffn_down"), hp.n_ff, hp.n_embd)};
}

MoeFfnWeights declare_moe_ffn(WeightLoader& loader, const ModelHParams& hp, int64_t layer,
                              const MoeLayout& layout) {
  STRATA_CHECK(hp.n_expert > 0 && hp.n_ff_exp > 0,
               "{}: expert_count and expert_feed_forward_length are required", hp.arch);
  MoeFfnWeights w;
  w.router = loader.matrix(layer_tensor(layer, "ffn_gate_inp"), hp.n_embd, hp.n_expert);
  w.gate_exps =
      loader.experts(layer_tensor(layer, "ffn_gate_exps"), hp.n_embd, hp.n_ff_exp, hp.n_expert);
  w.up_exps =
      loader.experts(layer_tensor(layer, "ffn_up_exps"), hp.n_embd, hp.n_ff_exp, hp.n_expert);
  w.down_exps =
      loader.experts(layer_tensor(layer, "ffn_down_exps"), hp.n_ff_exp, hp.n_embd, hp.n_expert);
  if (layout.router_bias)
    w.router_bias = loader.vector(layer_bias(layer, "ffn_gate_inp"), hp.n_expert);
  if (layout.expert_biases) {
    w.gate_bias = loader.floats(layer_bias(layer, "ffn_gate_exps"), {hp.n_ff_exp, hp.n_expert});
    w.up_bias = loader.floats(layer_bias(layer, "ffn_up_exps"), {hp.n_ff_exp, hp.n_expert});
    w.down_bias = loader.floats(layer_bias(layer, "ffn_down_exps"), {hp.n_embd, hp.n_expert});
  }
  if (layout.selection_bias) {
    w.selection_bias = loader.vector(layer_bias(layer, "exp_probs_b"), hp.n_expert);
  }
  if (layout.n_ff_shexp > 0) {
    const int64_t f = layout.n_ff_shexp;
    w.shared = {loader.matrix(layer_tensor(layer, "ffn_gate_shexp"), hp.n_embd, f),
                loader.matrix(layer_tensor(layer, "ffn_up_shexp"), hp.n_embd, f),
                loader.matrix(layer_tensor(layer, "ffn_down_shexp"), f, hp.n_embd)};
    w.shared_gate = loader.optional_vector(layer_tensor(layer, "ffn_gate_inp_shexp"), hp.n_embd);
  }
  return w;
}

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
