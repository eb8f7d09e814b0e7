#include "model/layer_spec.h"

#include <algorithm>

#include "util/error.h"

namespace strata {

bool ModelSpec::has_recurrent() const {
  return std::any_of(layers.begin(), layers.end(),
                     [](const LayerSpec& l) { return l.recurrent(); });
}

size_t ModelSpec::first_moe_layer() const {
  const auto it =
      std::find_if(layers.begin(), layers.end(), [](const LayerSpec& l) { return l.moe; });
  return static_cast<size_t>(it - layers.begin());
}

namespace {

// The name inside the block ("attn_q.weight" of "blk.N.attn_q.weight").
const char* block_name(LayerTensor what, bool post_attention_norm) {
  switch (what) {
    case LayerTensor::attn_norm:
      return "attn_norm.weight";
    case LayerTensor::ffn_norm:
      return post_attention_norm ? "post_attention_norm.weight" : "ffn_norm.weight";
    case LayerTensor::attn_q:
      return "attn_q.weight";
    case LayerTensor::attn_k:
      return "attn_k.weight";
    case LayerTensor::attn_v:
      return "attn_v.weight";
    case LayerTensor::attn_output:
      return "attn_output.weight";
    case LayerTensor::attn_q_norm:
      return "attn_q_norm.weight";
    case LayerTensor::attn_k_norm:
      return "attn_k_norm.weight";
    case LayerTensor::attn_q_bias:
      return "attn_q.bias";
    case LayerTensor::attn_k_bias:
      return "attn_k.bias";
    case LayerTensor::attn_v_bias:
      return "attn_v.bias";
    case LayerTensor::attn_output_bias:
      return "attn_output.bias";
    case LayerTensor::attn_sinks:
      return "attn_sinks.weight";
    case LayerTensor::gdn_qkv:
      return "attn_qkv.weight";
    case LayerTensor::gdn_gate:
      return "attn_gate.weight";
    case LayerTensor::gdn_beta:
      return "ssm_beta.weight";
    case LayerTensor::gdn_alpha:
      return "ssm_alpha.weight";
    case LayerTensor::gdn_ba:
      return "ssm_ba.weight";
    case LayerTensor::gdn_in:
      return "ssm_in.weight";
    case LayerTensor::gdn_conv:
      return "ssm_conv1d.weight";
    case LayerTensor::gdn_dt_bias:
      return "ssm_dt.bias";
    case LayerTensor::gdn_a:
      return "ssm_a";
    case LayerTensor::gdn_norm:
      return "ssm_norm.weight";
    case LayerTensor::gdn_out:
      return "ssm_out.weight";
    case LayerTensor::ffn_gate:
      return "ffn_gate.weight";
    case LayerTensor::ffn_up:
      return "ffn_up.weight";
    case LayerTensor::ffn_down:
      return "ffn_down.weight";
    case LayerTensor::router:
      return "ffn_gate_inp.weight";
    case LayerTensor::router_bias:
      return "ffn_gate_inp.bias";
    case LayerTensor::selection_bias:
      return "exp_probs_b.bias";
    case LayerTensor::gate_exps:
      return "ffn_gate_exps.weight";
    case LayerTensor::up_exps:
      return "ffn_up_exps.weight";
    case LayerTensor::down_exps:
      return "ffn_down_exps.weight";
    case LayerTensor::gate_exps_bias:
      return "ffn_gate_exps.bias";
    case LayerTensor::up_exps_bias:
      return "ffn_up_exps.bias";
    case LayerTensor::down_exps_bias:
      return "ffn_down_exps.bias";
    case LayerTensor::shexp_gate:
      return "ffn_gate_shexp.weight";
    case LayerTensor::shexp_up:
      return "ffn_up_shexp.weight";
    case LayerTensor::shexp_down:
      return "ffn_down_shexp.weight";
    case LayerTensor::shexp_router:
      return "ffn_gate_inp_shexp.weight";
    case LayerTensor::nextn_eh_proj:
      return "nextn.eh_proj.weight";
    case LayerTensor::nextn_enorm:
      return "nextn.enorm.weight";
    case LayerTensor::nextn_hnorm:
      return "nextn.hnorm.weight";
    case LayerTensor::nextn_shared_head_norm:
      return "nextn.shared_head_norm.weight";
  }
  return "?";
}

// Appends a block's tensors under their GGUF names.
class BlockTensors {
 public:
  BlockTensors(int64_t layer, bool post_attention_norm, std::vector<TensorSpec>& out)
      : layer_(layer), post_attention_norm_(post_attention_norm), out_(out) {}

  void add(LayerTensor what, TensorForm form, std::vector<int64_t> shape, bool optional = false) {
    out_.push_back({what, layer_tensor_name(what, layer_, post_attention_norm_), std::move(shape),
                    form, optional});
  }
  // A matrix product [cols] -> [rows].
  void matrix(LayerTensor what, int64_t cols, int64_t rows) {
    add(what, TensorForm::matrix, {cols, rows});
  }
  void floats(LayerTensor what, std::vector<int64_t> shape, bool optional = false) {
    add(what, TensorForm::floats, std::move(shape), optional);
  }

 private:
  int64_t layer_;
  bool post_attention_norm_;
  std::vector<TensorSpec>& out_;
};

void add_attention(BlockTensors& t, const ModelHParams& hp, const AttentionLayout& a) {
  const int64_t q_dim = hp.n_head * hp.head_dim, kv_dim = hp.n_head_kv * hp.head_dim;
  t.matrix(LayerTensor::attn_q, hp.n_embd, a.gated_q ? 2 * q_dim : q_dim);
  t.matrix(LayerTensor::attn_k, hp.n_embd, kv_dim);
  t.matrix(LayerTensor::attn_v, hp.n_embd, kv_dim);
  t.matrix(LayerTensor::attn_output, q_dim, hp.n_embd);
  if (a.qk_norm != AttentionLayout::QkNorm::none) {
    const bool optional = a.qk_norm == AttentionLayout::QkNorm::optional;
    t.floats(LayerTensor::attn_q_norm, {hp.head_dim}, optional);
    t.floats(LayerTensor::attn_k_norm, {hp.head_dim}, optional);
  }
  if (a.qkv_bias) {
    STRATA_CHECK(!a.gated_q, "a query bias with a gated query projection is not supported");
    t.floats(LayerTensor::attn_q_bias, {q_dim});
    t.floats(LayerTensor::attn_k_bias, {kv_dim});
    t.floats(LayerTensor::attn_v_bias, {kv_dim});
  }
  if (a.output_bias) t.floats(LayerTensor::attn_output_bias, {hp.n_embd});
  if (a.sinks) t.floats(LayerTensor::attn_sinks, {hp.n_head});
}

void add_gated_delta_net(BlockTensors& t, const ModelHParams& hp, const ModelSpec& spec) {
  const GatedDeltaNetParams& p = spec.gdn;
  const int64_t conv_dim = p.conv_dim(), v_dim = p.n_v_heads * p.d_v;
  if (spec.projections == GdnProjections::fused_in) {
    t.matrix(LayerTensor::gdn_in, hp.n_embd, conv_dim + v_dim);
  } else {
    t.matrix(LayerTensor::gdn_qkv, hp.n_embd, conv_dim);
    t.matrix(LayerTensor::gdn_gate, hp.n_embd, v_dim);
  }
  if (spec.projections == GdnProjections::separate) {
    t.matrix(LayerTensor::gdn_beta, hp.n_embd, p.n_v_heads);
    t.matrix(LayerTensor::gdn_alpha, hp.n_embd, p.n_v_heads);
  } else {
    t.matrix(LayerTensor::gdn_ba, hp.n_embd, 2 * p.n_v_heads);
  }
  t.floats(LayerTensor::gdn_conv, {p.conv_kernel, conv_dim});
  t.floats(LayerTensor::gdn_dt_bias, {p.n_v_heads});
  t.floats(LayerTensor::gdn_a, {p.n_v_heads});
  t.floats(LayerTensor::gdn_norm, {p.d_v});
  t.matrix(LayerTensor::gdn_out, v_dim, hp.n_embd);
}

void add_dense_ffn(BlockTensors& t, const ModelHParams& hp) {
  STRATA_CHECK(hp.n_ff > 0, "{}.feed_forward_length is missing", hp.arch);
  t.matrix(LayerTensor::ffn_gate, hp.n_embd, hp.n_ff);
  t.matrix(LayerTensor::ffn_up, hp.n_embd, hp.n_ff);
  t.matrix(LayerTensor::ffn_down, hp.n_ff, hp.n_embd);
}

void add_moe_ffn(BlockTensors& t, const ModelHParams& hp, const MoeLayout& m) {
  STRATA_CHECK(hp.n_expert > 0 && hp.n_ff_exp > 0,
               "{}: expert_count and expert_feed_forward_length are required", hp.arch);
  t.add(LayerTensor::router, TensorForm::router_matrix, {hp.n_embd, hp.n_expert});
  t.add(LayerTensor::gate_exps, TensorForm::experts, {hp.n_embd, hp.n_ff_exp, hp.n_expert});
  t.add(LayerTensor::up_exps, TensorForm::experts, {hp.n_embd, hp.n_ff_exp, hp.n_expert});
  t.add(LayerTensor::down_exps, TensorForm::experts, {hp.n_ff_exp, hp.n_embd, hp.n_expert});
  if (m.router_bias) t.floats(LayerTensor::router_bias, {hp.n_expert});
  if (m.expert_biases) {
    t.floats(LayerTensor::gate_exps_bias, {hp.n_ff_exp, hp.n_expert});
    t.floats(LayerTensor::up_exps_bias, {hp.n_ff_exp, hp.n_expert});
    t.floats(LayerTensor::down_exps_bias, {hp.n_embd, hp.n_expert});
  }
  if (m.selection_bias) t.floats(LayerTensor::selection_bias, {hp.n_expert});
  if (m.n_ff_shexp > 0) {
    t.matrix(LayerTensor::shexp_gate, hp.n_embd, m.n_ff_shexp);
    t.matrix(LayerTensor::shexp_up, hp.n_embd, m.n_ff_shexp);
    t.matrix(LayerTensor::shexp_down, m.n_ff_shexp, hp.n_embd);
    t.floats(LayerTensor::shexp_router, {hp.n_embd}, !m.shared_gate);
  }
}

void add_block(std::vector<TensorSpec>& out, const ModelHParams& hp, const ModelSpec& spec,
               const LayerSpec& l, int64_t layer) {
  BlockTensors t(layer, l.post_attention_norm, out);
  t.floats(LayerTensor::attn_norm, {hp.n_embd});
  if (l.recurrent()) {
    add_gated_delta_net(t, hp, spec);
  } else {
    add_attention(t, hp, l.attention);
  }
  t.floats(LayerTensor::ffn_norm, {hp.n_embd});
  if (l.moe) {
    add_moe_ffn(t, hp, l.moe_layout);
  } else {
    add_dense_ffn(t, hp);
  }
}

}  // namespace

std::string layer_tensor_name(LayerTensor what, int64_t layer, bool post_attention_norm) {
  return "blk." + std::to_string(layer) + "." + block_name(what, post_attention_norm);
}

std::vector<TensorSpec> layer_tensors(const ModelHParams& hp, const ModelSpec& spec,
                                      int64_t layer) {
  STRATA_CHECK(layer >= 0 && layer < static_cast<int64_t>(spec.layers.size()),
               "layer {} of a {}-layer model", layer, spec.layers.size());
  std::vector<TensorSpec> out;
  add_block(out, hp, spec, spec.layers[static_cast<size_t>(layer)], layer);
  return out;
}

std::vector<TensorSpec> nextn_block_tensors(const ModelHParams& hp, const ModelSpec& spec,
                                            int64_t layer) {
  STRATA_CHECK(!spec.layers.empty(), "a NextN block after no layers");
  std::vector<TensorSpec> out;
  add_block(out, hp, spec, spec.layers.back(), layer);
  BlockTensors t(layer, false, out);
  t.matrix(LayerTensor::nextn_eh_proj, 2 * hp.n_embd, hp.n_embd);
  t.floats(LayerTensor::nextn_enorm, {hp.n_embd});
  t.floats(LayerTensor::nextn_hnorm, {hp.n_embd});
  t.floats(LayerTensor::nextn_shared_head_norm, {hp.n_embd});
  return out;
}

}  // namespace strata
