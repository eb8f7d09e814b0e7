#include "plan/architecture_tensors.h"

namespace strata::plan {
namespace {

// Appends tensors under their GGUF names ("blk.N.base.suffix").
class TensorList {
 public:
  explicit TensorList(std::vector<ArchitectureTensor>& out) : out_(out) {}

  // A matrix stored at the quantization's bits.
  void matrix(int layer, const std::string& base, int64_t elements) {
    push(layer, base, "weight", elements, true, true);
  }
  // A matrix kept in f32 by the converters (routers).
  void f32_matrix(int layer, const std::string& base, int64_t elements) {
    push(layer, base, "weight", elements, true, false);
  }
  // Norms, sinks, convolutions, gates: f32 vectors.
  void vector(int layer, const std::string& base, int64_t elements) {
    push(layer, base, "weight", elements, false, false);
  }
  void bias(int layer, const std::string& base, int64_t elements) {
    push(layer, base, "bias", elements, false, false);
  }
  // The routed experts: the quantization's bits, or the spec's fixed expert type.
  void experts(int layer, const std::string& base, int64_t elements,
               std::optional<GgmlType> fixed_type) {
    push(layer, base, "weight", elements, true, !fixed_type);
    out_.back().fixed_type = fixed_type;
  }

 private:
  void push(int layer, const std::string& base, const char* suffix, int64_t elements,
            bool is_matrix, bool quantized) {
    const std::string name =
        (layer >= 0 ? "blk." + std::to_string(layer) + "." : std::string()) + base + "." + suffix;
    out_.push_back({name, classify_tensor(name), layer, elements, is_matrix, quantized, {}});
  }

  std::vector<ArchitectureTensor>& out_;
};

void add_attention(TensorList& t, const ArchitectureSpec& s, int l) {
  const int64_t e = s.n_embd;
  const int64_t q = int64_t{s.n_head} * s.head_dim, kv = int64_t{s.n_head_kv} * s.head_dim;
  t.matrix(l, "attn_q", e * q * (s.attention_output_gate ? 2 : 1));
  t.matrix(l, "attn_k", e * kv);
  t.matrix(l, "attn_v", e * kv);
  t.matrix(l, "attn_output", q * e);
  if (s.qk_norm) {
    t.vector(l, "attn_q_norm", s.head_dim);
    t.vector(l, "attn_k_norm", s.head_dim);
  }
  if (s.qkv_bias) {
    t.bias(l, "attn_q", q);
    t.bias(l, "attn_k", kv);
    t.bias(l, "attn_v", kv);
  }
  if (s.output_bias) t.bias(l, "attn_output", e);
  if (s.attention_sinks) t.vector(l, "attn_sinks", s.n_head);
}

void add_gated_delta_net(TensorList& t, const ArchitectureSpec& s, int l) {
  const int64_t e = s.n_embd;
  const int64_t k = int64_t{s.linear_n_k_heads} * s.linear_head_dim;
  const int64_t v = int64_t{s.linear_n_v_heads} * s.linear_head_dim;
  if (s.linear_qkv_gate_ba) {
    t.matrix(l, "attn_qkv", e * (2 * k + v));
    t.matrix(l, "attn_gate", e * v);  // z
    t.matrix(l, "ssm_ba", e * 2 * s.linear_n_v_heads);
  } else {
    t.matrix(l, "ssm_in", e * (2 * k + 2 * v));  // q, k, v, z
    t.matrix(l, "ssm_beta_alpha", e * 2 * s.linear_n_v_heads);
  }
  t.vector(l, "ssm_conv1d", (2 * k + v) * s.linear_conv_kernel);
  t.matrix(l, "ssm_out", v * e);
  t.vector(l, "ssm_a", s.linear_n_v_heads);
  t.vector(l, "ssm_dt", s.linear_n_v_heads);
  t.vector(l, "ssm_norm", s.linear_head_dim);
}

void add_ffn(TensorList& t, const ArchitectureSpec& s, int l) {
  const int64_t e = s.n_embd;
  if (l < s.n_leading_dense) {
    t.matrix(l, "ffn_gate", e * s.n_ff_dense);
    t.matrix(l, "ffn_up", e * s.n_ff_dense);
    t.matrix(l, "ffn_down", e * s.n_ff_dense);
    return;
  }
  t.f32_matrix(l, "ffn_gate_inp", e * s.n_expert);
  if (s.router_bias) t.bias(l, "ffn_gate_inp", s.n_expert);
  if (s.selection_bias) t.bias(l, "exp_probs_b", s.n_expert);
  const int64_t exp = e * s.n_ff_exp * s.n_expert;
  t.experts(l, "ffn_gate_exps", exp, s.expert_type);
  t.experts(l, "ffn_up_exps", exp, s.expert_type);
  t.experts(l, "ffn_down_exps", exp, s.expert_type);
  if (s.expert_biases) {
    t.bias(l, "ffn_gate_exps", int64_t{s.n_ff_exp} * s.n_expert);
    t.bias(l, "ffn_up_exps", int64_t{s.n_ff_exp} * s.n_expert);
    t.bias(l, "ffn_down_exps", e * s.n_expert);
  }
  if (s.n_ff_shexp > 0) {
    if (s.shared_expert_gate) t.vector(l, "ffn_gate_inp_shexp", e);
    t.matrix(l, "ffn_gate_shexp", e * s.n_ff_shexp);
    t.matrix(l, "ffn_up_shexp", e * s.n_ff_shexp);
    t.matrix(l, "ffn_down_shexp", e * s.n_ff_shexp);
  }
}

void add_block(TensorList& t, const ArchitectureSpec& s, int l) {
  t.vector(l, "attn_norm", s.n_embd);
  const bool full = s.full_attention_interval <= 1 || (l + 1) % s.full_attention_interval == 0;
  if (full) {
    add_attention(t, s, l);
  } else {
    add_gated_delta_net(t, s, l);
  }
  t.vector(l, "post_attention_norm", s.n_embd);
  add_ffn(t, s, l);
}

}  // namespace

std::vector<ArchitectureTensor> architecture_tensors(const ArchitectureSpec& s) {
  std::vector<ArchitectureTensor> out;
  TensorList t(out);
  const int64_t e = s.n_embd;
  t.matrix(-1, "token_embd", e * s.n_vocab);
  for (int l = 0; l < s.n_layer; ++l) add_block(t, s, l);
  for (int l = s.n_layer; l < s.n_layer + s.n_nextn_layer; ++l) {
    // GLM's NextN block: a whole layer plus the projection of [embedding, hidden state].
    add_block(t, s, l);
    t.matrix(l, "nextn.eh_proj", 2 * e * e);
    t.vector(l, "nextn.enorm", e);
    t.vector(l, "nextn.hnorm", e);
    t.vector(l, "nextn.shared_head_norm", e);
  }
  t.vector(-1, "output_norm", e);
  if (!s.tied_embeddings) t.matrix(-1, "output", e * s.n_vocab);
  return out;
}

}  // namespace strata::plan
