#include "plan/architecture_tensors.h"

#include "model/hparams.h"

namespace strata::plan {
namespace {

ModelHParams hparams_of(const ArchitectureSpec& s) {
  ModelHParams hp;
  hp.arch = s.arch;
  hp.n_layer = s.n_layer;
  hp.n_embd = s.n_embd;
  hp.n_head = s.n_head;
  hp.n_head_kv = s.n_head_kv;
  hp.head_dim = s.head_dim;
  hp.n_ff = s.n_ff_dense;
  hp.n_expert = s.n_expert;
  hp.n_expert_used = s.n_expert_used;
  hp.n_ff_exp = s.n_ff_exp;
  hp.n_vocab = s.n_vocab;
  hp.sliding_window = s.sliding_window;
  return hp;
}

// The layers the model's loader would build for a file of this architecture.
ModelSpec model_spec_of(const ArchitectureSpec& s, const ModelHParams& hp) {
  ModelSpec spec;
  spec.skipped_layers = s.n_nextn_layer;
  spec.projections = s.linear_projections;
  spec.gdn.n_k_heads = s.linear_n_k_heads;
  spec.gdn.n_v_heads = s.linear_n_v_heads;
  spec.gdn.d_k = spec.gdn.d_v = s.linear_head_dim;
  spec.gdn.conv_kernel = s.linear_conv_kernel;
  // The GGUF converters call the pre-FFN norm post_attention_norm except in the Qwen3 family.
  const bool post_attention_norm = s.arch != "qwen3moe" && s.arch != "qwen3" && s.arch != "llama";
  for (int l = 0; l < s.n_layer; ++l) {
    LayerSpec layer;
    const bool full = s.full_attention_interval <= 1 || (l + 1) % s.full_attention_interval == 0;
    layer.mixer = full ? LayerSpec::Mixer::attention : LayerSpec::Mixer::gated_delta_net;
    layer.attention.qk_norm =
        s.qk_norm ? AttentionLayout::QkNorm::required : AttentionLayout::QkNorm::none;
    layer.attention.gated_q = s.attention_output_gate;
    layer.attention.qkv_bias = s.qkv_bias;
    layer.attention.output_bias = s.output_bias;
    layer.attention.sinks = s.attention_sinks;
    layer.window = hp.layer_window(l);
    layer.moe = s.n_expert > 0 && l >= s.n_leading_dense;
    layer.moe_layout.router_bias = s.router_bias;
    layer.moe_layout.expert_biases = s.expert_biases;
    layer.moe_layout.selection_bias = s.selection_bias;
    layer.moe_layout.n_ff_shexp = s.n_ff_shexp;
    layer.moe_layout.shared_gate = s.shared_expert_gate;
    layer.post_attention_norm = post_attention_norm;
    spec.layers.push_back(layer);
  }
  return spec;
}

ArchitectureTensor priced(const std::string& name, const std::vector<int64_t>& shape,
                          TensorForm form, int layer, std::optional<GgmlType> expert_type) {
  ArchitectureTensor out;
  out.name = name;
  out.role = classify_tensor(name);
  out.layer = layer;
  out.elements = 1;
  for (int64_t d : shape) out.elements *= d;
  out.n_dims = static_cast<int>(shape.size());
  out.row_length = shape.empty() ? 0 : shape.front();
  out.matrix = form != TensorForm::floats;
  out.quantized = form == TensorForm::matrix || (form == TensorForm::experts && !expert_type);
  if (form == TensorForm::experts) out.fixed_type = expert_type;
  return out;
}

}  // namespace

std::vector<ArchitectureTensor> architecture_tensors(const ArchitectureSpec& s) {
  const ModelHParams hp = hparams_of(s);
  const ModelSpec spec = model_spec_of(s, hp);
  std::vector<ArchitectureTensor> out;
  const auto add = [&](const std::vector<TensorSpec>& tensors, int layer) {
    for (const TensorSpec& t : tensors) {
      // Optional tensors are those a file may lack: the preset's flags say which it has.
      if (!t.optional) out.push_back(priced(t.name, t.shape, t.form, layer, s.expert_type));
    }
  };
  out.push_back(priced(kTokenEmbdTensor, {s.n_embd, s.n_vocab}, TensorForm::matrix, -1, {}));
  for (int l = 0; l < s.n_layer; ++l) add(layer_tensors(hp, spec, l), l);
  for (int l = s.n_layer; l < s.n_layer + s.n_nextn_layer; ++l)
    add(nextn_block_tensors(hp, spec, l), l);
  out.push_back(priced(kOutputNormTensor, {s.n_embd}, TensorForm::floats, -1, {}));
  if (!s.tied_embeddings)
    out.push_back(priced(kOutputTensor, {s.n_embd, s.n_vocab}, TensorForm::matrix, -1, {}));
  return out;
}

}  // namespace strata::plan
