#include "synthetic_layers.h"

#include <fmt/format.h>

#include <cmath>

namespace strata::tools {
namespace {

// Adds one block's tensors under "blk.N.<name>.weight" / ".bias".
class Block {
 public:
  Block(const SyntheticModelSpec& s, RandomWeights& weights, GgufWriter& w, int64_t layer)
      : s_(s), weights_(weights), w_(w), layer_(layer) {}

  // A matrix of the file type's mix; shape in GGUF order ([cols, rows] or [cols, rows, experts]).
  void matrix(const char* name, const char* role, std::vector<int64_t> shape,
              bool routed_expert = false) {
    const GgmlType t = tensor_type(s_, role, layer_, shape[0], routed_expert);
    int64_t rows = 1;
    for (size_t d = 1; d < shape.size(); ++d) rows *= shape[d];
    w_.add_tensor(weight(name), t, shape, weights_.matrix(t, shape[0], rows));
  }
  void norm(const char* name, int64_t n) {
    w_.add_tensor(weight(name), GgmlType::F32, {n}, weights_.norm(n));
  }
  // An f32 tensor of N(0, stddev) values under its full name within the block.
  void f32(const std::string& name, std::vector<int64_t> shape, float stddev) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    w_.add_tensor(fmt::format("blk.{}.{}", layer_, name), GgmlType::F32, shape,
                  weights_.normal_f32(n, 0.0f, stddev));
  }
  void bias(const char* name, std::vector<int64_t> shape, float stddev = 0.05f) {
    f32(std::string(name) + ".bias", std::move(shape), stddev);
  }
  void router() {
    w_.add_tensor(weight("ffn_gate_inp"), GgmlType::F32, {s_.n_embd, s_.n_expert},
                  weights_.router());
  }
  void ssm_a(int64_t n) {
    w_.add_tensor(fmt::format("blk.{}.ssm_a", layer_), GgmlType::F32, {n}, weights_.ssm_a(n));
  }

 private:
  std::string weight(const char* name) const {
    return fmt::format("blk.{}.{}.weight", layer_, name);
  }

  const SyntheticModelSpec& s_;
  RandomWeights& weights_;
  GgufWriter& w_;
  int64_t layer_;
};

void add_attention(const SyntheticModelSpec& s, Block& b) {
  const std::string& a = s.arch;
  const int64_t e = s.n_embd, q = s.n_head * s.head_dim, kv = s.n_head_kv * s.head_dim;
  b.matrix("attn_q", "attn_q", {e, is_hybrid(s) ? 2 * q : q});  // hybrids: query and gate
  b.matrix("attn_k", "attn_k", {e, kv});
  b.matrix("attn_v", "attn_v", {e, kv});
  b.matrix("attn_output", "attn_output", {q, e});
  const bool qk_norm =
      a == "qwen3" || a == "qwen3moe" || is_hybrid(s) || (a == "glm4moe" && s.qk_norm);
  if (qk_norm) {
    b.norm("attn_q_norm", s.head_dim);
    b.norm("attn_k_norm", s.head_dim);
  }
  if (a == "gpt-oss" || a == "glm4moe") {
    b.bias("attn_q", {q});
    b.bias("attn_k", {kv});
    b.bias("attn_v", {kv});
  }
  if (a == "gpt-oss") {
    b.bias("attn_output", {e});
    b.f32("attn_sinks.weight", {s.n_head}, 1.0f);
  }
}

void add_gated_delta_net(const SyntheticModelSpec& s, Block& b) {
  const int64_t e = s.n_embd, dk = s.ssm_head_dim, v_dim = s.ssm_v_heads * dk;
  const int64_t conv_dim = 2 * s.ssm_k_heads * dk + v_dim;
  b.matrix("attn_qkv", "attn_qkv", {e, conv_dim});
  b.matrix("attn_gate", "attn_gate", {e, v_dim});
  if (s.arch == "qwen3next") {
    // One fused projection grouped by key head (random weights: the order does not matter).
    b.matrix("ssm_ba", "ssm_ba", {e, 2 * s.ssm_v_heads});
  } else {
    b.matrix("ssm_beta", "ssm_beta", {e, s.ssm_v_heads});
    b.matrix("ssm_alpha", "ssm_alpha", {e, s.ssm_v_heads});
  }
  b.f32("ssm_conv1d.weight", {s.ssm_conv_kernel, conv_dim}, 0.5f);
  b.f32("ssm_dt.bias", {s.ssm_v_heads}, 0.5f);
  b.ssm_a(s.ssm_v_heads);
  b.norm("ssm_norm", dk);
  b.matrix("ssm_out", "ssm_out", {v_dim, e});
}

void add_ffn(const SyntheticModelSpec& s, Block& b, int64_t layer) {
  const std::string& a = s.arch;
  const int64_t e = s.n_embd, f = s.n_ff_exp, n = s.n_expert;
  if (!has_experts(s, layer)) {
    b.matrix("ffn_gate", "ffn_gate", {e, s.n_ff});
    b.matrix("ffn_up", "ffn_up", {e, s.n_ff});
    b.matrix("ffn_down", "ffn_down", {s.n_ff, e});
    return;
  }
  b.router();
  if (a == "gpt-oss") b.bias("ffn_gate_inp", {n}, 0.1f);
  if (a == "glm4moe") b.bias("exp_probs_b", {n}, 0.1f);  // the score-correction bias
  b.matrix("ffn_gate_exps", "ffn_gate", {e, f, n}, true);
  b.matrix("ffn_up_exps", "ffn_up", {e, f, n}, true);
  b.matrix("ffn_down_exps", "ffn_down", {f, e, n}, true);
  if (a == "gpt-oss") {
    b.bias("ffn_gate_exps", {f, n});
    b.bias("ffn_up_exps", {f, n});
    b.bias("ffn_down_exps", {e, n});
  }
  if (is_hybrid(s) || a == "glm4moe") {
    // Qwen gates the shared expert with a sigmoid of one vector; GLM adds it ungated.
    if (a != "glm4moe") b.f32("ffn_gate_inp_shexp.weight", {e}, 1.0f / std::sqrt(float(e)));
    b.matrix("ffn_gate_shexp", "ffn_gate", {e, s.n_ff_shexp});
    b.matrix("ffn_up_shexp", "ffn_up", {e, s.n_ff_shexp});
    b.matrix("ffn_down_shexp", "ffn_down", {s.n_ff_shexp, e});
  }
}

}  // namespace

bool is_hybrid(const SyntheticModelSpec& s) {
  return s.arch == "qwen35moe" || s.arch == "qwen3next";
}

bool has_experts(const SyntheticModelSpec& s, int64_t layer) {
  if (s.arch == "qwen3" || s.arch == "llama") return false;
  return s.arch != "glm4moe" || layer >= s.n_leading_dense;
}

void add_block_tensors(const SyntheticModelSpec& s, RandomWeights& weights, GgufWriter& w,
                       int64_t layer) {
  Block b(s, weights, w, layer);
  b.norm("attn_norm", s.n_embd);
  // A hybrid's MTP block (past n_layer) is one of its full-attention layers.
  const bool recurrent =
      is_hybrid(s) && layer < s.n_layer && (layer + 1) % s.full_attention_interval != 0;
  if (recurrent) {
    add_gated_delta_net(s, b);
  } else {
    add_attention(s, b);
  }
  // gpt-oss, GLM and the Qwen hybrids call the pre-FFN norm post_attention_norm.
  const bool post = is_hybrid(s) || s.arch == "gpt-oss" || s.arch == "glm4moe";
  b.norm(post ? "post_attention_norm" : "ffn_norm", s.n_embd);
  add_ffn(s, b, layer);
}

void add_nextn_block_tensors(const SyntheticModelSpec& s, RandomWeights& weights, GgufWriter& w,
                             int64_t layer) {
  add_block_tensors(s, weights, w, layer);
  Block b(s, weights, w, layer);
  b.matrix("nextn.eh_proj", "nextn.eh_proj", {2 * s.n_embd, s.n_embd});
  b.norm("nextn.enorm", s.n_embd);
  b.norm("nextn.hnorm", s.n_embd);
  b.norm("nextn.shared_head_norm", s.n_embd);
}

}  // namespace strata::tools
