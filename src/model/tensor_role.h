#pragma once
// What a tensor is for, from its GGUF name: the inventory `strata inspect` prints and the
// planner places (routed experts are what a plan moves between RAM and VRAM).

#include <optional>
#include <string_view>

namespace strata {

enum class TensorRole {
  routed_experts,  // blk.N.ffn_{gate,up,down,gate_up}_exps (weights and per-expert biases)
  shared_experts,  // blk.N.ffn_*_shexp (and the shared expert's gate)
  router,          // blk.N.ffn_gate_inp (and its bias), blk.N.exp_probs_b (selection bias)
  dense_ffn,       // blk.N.ffn_{gate,up,down} (dense models, leading dense layers of MoEs)
  attention,       // blk.N.attn_{q,k,v,qkv,output,gate,sinks} and their biases
  recurrent,       // blk.N.ssm_* (Gated DeltaNet: ssm_in, ssm_ba, ssm_conv1d, ssm_out...)
  embeddings,      // token_embd
  output,          // output (LM head)
  norms,           // *_norm
  other,
};
constexpr int kTensorRoleCount = 10;

std::string_view tensor_role_name(TensorRole role);
TensorRole classify_tensor(std::string_view name);
// The layer index of "blk.N.*" names; nullopt for tensors outside the repeated blocks.
std::optional<int> tensor_layer(std::string_view name);

}  // namespace strata
