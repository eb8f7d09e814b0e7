#pragma once
// What each layer of a decoder is made of, built by the architectures (model/archs/) from a
// file's hyper-parameters: the mixer (attention with its variants, or Gated DeltaNet), the FFN
// (dense, or routed experts with their routing variant and shared expert) and the norms.
//
// The tensors a layer needs (GGUF names, shapes, how they are stored) are derived from the spec
// here, once: the CPU weight loader, the GPU upload and the planner's inventory of published
// architectures all take them from layer_tensors().

#include <cstdint>
#include <string>
#include <vector>

#include "model/blocks.h"
#include "model/hparams.h"

namespace strata {

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
  // The shared expert's sigmoid gate (ffn_gate_inp_shexp): required when set (Qwen), else taken
  // when the file has one (GLM-4.5 adds its shared expert ungated).
  bool shared_gate = false;
};

// How a Gated DeltaNet layer's input projections are stored: separate (Qwen3.5: attn_qkv,
// attn_gate, ssm_beta, ssm_alpha), a fused ssm_ba (Qwen3-Next), or fused ssm_in + ssm_ba
// (Qwen3-Next files converted before 2026).
enum class GdnProjections { separate, fused_ba, fused_in };

struct LayerSpec {
  enum class Mixer { attention, gated_delta_net };
  Mixer mixer = Mixer::attention;
  AttentionLayout attention;  // attention layers
  int64_t window = 0;         // attention layers: the positions attended (0: all)
  bool moe = false;           // routed experts, else a dense FFN
  MoeLayout moe_layout;
  // The pre-FFN norm is called post_attention_norm (gpt-oss, GLM-4.5, the Qwen hybrids), else
  // ffn_norm.
  bool post_attention_norm = false;

  bool recurrent() const { return mixer == Mixer::gated_delta_net; }
};

struct ModelSpec {
  std::vector<LayerSpec> layers;  // [n_layer]
  GatedDeltaNetParams gdn;        // the Gated DeltaNet layers' (when there are any)
  GdnProjections projections = GdnProjections::separate;
  // Blocks after the decoding layers the files carry (multi-token prediction), not run.
  int64_t skipped_layers = 0;

  bool has_recurrent() const;
  // The first layer with routed experts (layers.size() when none has).
  size_t first_moe_layer() const;
};

// Which weight of a layer a tensor is.
enum class LayerTensor {
  attn_norm,
  ffn_norm,  // the pre-FFN norm, whatever the file calls it
  attn_q,
  attn_k,
  attn_v,
  attn_output,
  attn_q_norm,
  attn_k_norm,
  attn_q_bias,
  attn_k_bias,
  attn_v_bias,
  attn_output_bias,
  attn_sinks,
  gdn_qkv,
  gdn_gate,
  gdn_beta,
  gdn_alpha,
  gdn_ba,  // fused beta and alpha
  gdn_in,  // fused q, k, v and the output gate
  gdn_conv,
  gdn_dt_bias,
  gdn_a,
  gdn_norm,
  gdn_out,
  ffn_gate,
  ffn_up,
  ffn_down,
  router,
  router_bias,
  selection_bias,
  gate_exps,
  up_exps,
  down_exps,
  gate_exps_bias,
  up_exps_bias,
  down_exps_bias,
  shexp_gate,
  shexp_up,
  shexp_down,
  shexp_router,  // the shared expert's sigmoid gate vector
  // GLM's NextN (multi-token prediction) block, never run.
  nextn_eh_proj,
  nextn_enorm,
  nextn_hnorm,
  nextn_shared_head_norm,
};

// How a tensor is stored and used.
enum class TensorForm {
  matrix,         // a weight matrix at the file's quantization (one product per token)
  router_matrix,  // a matrix the converters keep in f32 (routers)
  experts,        // a stack of expert matrices (GGUF {cols, rows, n_expert})
  floats,         // norms, biases, sinks, convolutions: f32 values
};

struct TensorSpec {
  LayerTensor what;
  std::string name;            // the GGUF name
  std::vector<int64_t> shape;  // GGUF order: a row's length first
  TensorForm form = TensorForm::matrix;
  bool optional = false;  // taken when the file has it
};

// Global tensors.
inline constexpr const char* kTokenEmbdTensor = "token_embd.weight";
inline constexpr const char* kOutputNormTensor = "output_norm.weight";
inline constexpr const char* kOutputTensor = "output.weight";  // absent: tied to token_embd

// The GGUF name of layer `layer`'s tensor `what` (post_attention_norm: the spec's naming).
std::string layer_tensor_name(LayerTensor what, int64_t layer, bool post_attention_norm = false);

// Every tensor of layer `layer`, in a fixed order (norms, mixer, FFN). Throws strata::Error for a
// spec the hyper-parameters cannot give shapes to (an FFN width missing, a query bias on a gated
// query).
std::vector<TensorSpec> layer_tensors(const ModelHParams& hp, const ModelSpec& spec, int64_t layer);

// Every tensor of skipped block `layer` (n_layer and up): GLM's NextN block, a whole layer like
// the last one plus the projection of [embedding, hidden state] and its norms.
std::vector<TensorSpec> nextn_block_tensors(const ModelHParams& hp, const ModelSpec& spec,
                                            int64_t layer);

}  // namespace strata
