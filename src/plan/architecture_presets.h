#pragma once
// Published MoE architectures, described well enough to list every tensor of their GGUF files
// without downloading one: `strata plan --arch NAME` plans them from the shapes alone.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/ggml_type.h"
#include "model/layer_spec.h"

namespace strata::plan {

struct ArchitectureSpec {
  std::string name;
  std::string arch;  // GGUF architecture: qwen3moe, qwen35moe, qwen3next, gpt-oss, glm4moe
  int n_layer = 0;   // decoding layers (NextN / MTP blocks not included)
  int n_embd = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  // Attention.
  bool attention_output_gate = false;  // q projection doubled (gated attention, Qwen3-Next style)
  bool qk_norm = true;                 // per-head q/k RMSNorm (not in GLM-4.5-Air or gpt-oss)
  bool qkv_bias = false;               // biases on q, k, v (GLM-4.5, gpt-oss)
  bool output_bias = false;            // bias on the output projection (gpt-oss)
  bool attention_sinks = false;        // one sink logit per head (gpt-oss)
  // Even layers attend to the last `sliding_window` positions only, odd layers to all (gpt-oss).
  int sliding_window = 0;
  // Feed-forward.
  int n_expert = 0;
  int n_expert_used = 0;
  int n_ff_exp = 0;
  int n_ff_shexp = 0;              // 0: no shared expert
  bool shared_expert_gate = true;  // Qwen's sigmoid gate vector; GLM-4.5 adds it ungated
  bool router_bias = false;        // gpt-oss
  bool expert_biases = false;      // per-expert gate/up/down biases (gpt-oss)
  bool selection_bias = false;     // GLM-4.5's score-correction bias (exp_probs_b)
  int n_leading_dense = 0;         // the first layers have a dense FFN instead (GLM-4.5)
  int n_ff_dense = 0;              // its width
  // Blocks after the decoding layers that files carry and plain decoding skips (GLM's NextN).
  int n_nextn_layer = 0;
  // The type published files keep the routed experts in whatever the quantization (gpt-oss:
  // MXFP4, 4.25 bits per weight); unset: the experts take the quantization's bits too.
  std::optional<GgmlType> expert_type;
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  bool tied_embeddings = false;
  // Hybrids: every `full_attention_interval`-th layer has full attention (KV cache), the others
  // are Gated DeltaNet layers with recurrent state. 0 or 1: all layers have full attention.
  int full_attention_interval = 0;
  int linear_n_k_heads = 0;
  int linear_n_v_heads = 0;
  int linear_head_dim = 0;
  int linear_conv_kernel = 4;
  // How the Gated DeltaNet input projections are stored (the same bytes either way): Qwen3.5's
  // separate attn_qkv, attn_gate, ssm_beta, ssm_alpha, or Qwen3-Next's fused ssm_ba.
  GdnProjections linear_projections = GdnProjections::separate;
};

// Built-in presets: qwen3-30b-a3b, qwen3-coder-30b-a3b, qwen3.5-35b-a3b, qwen3-next-80b-a3b,
// gpt-oss-20b, gpt-oss-120b, glm-4.5-air.
std::optional<ArchitectureSpec> architecture_preset(std::string_view name);
std::vector<std::string> architecture_preset_names();

}  // namespace strata::plan
