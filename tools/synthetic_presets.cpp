// The published shapes make-synthetic-model --preset writes (sources: the planner's presets in
// src/plan/architecture_presets.cpp).

#include "synthetic_model.h"
#include "util/error.h"

namespace strata::tools {

SyntheticModelSpec qwen3_30b_a3b_spec(int64_t layers) {
  SyntheticModelSpec s;
  s.arch = "qwen3moe";
  s.n_layer = layers;
  s.n_embd = 2048;
  s.n_head = 32;
  s.n_head_kv = 4;
  s.head_dim = 128;
  s.n_ff = 6144;
  s.n_expert = 128;
  s.n_expert_used = 8;
  s.n_ff_exp = 768;
  s.n_vocab = 151936;
  s.n_ctx_train = 40960;
  s.rope_base = 1e6f;
  return s;
}

SyntheticModelSpec qwen35_35b_a3b_spec(int64_t layers) {
  SyntheticModelSpec s;
  s.arch = "qwen35moe";
  s.n_layer = layers;
  s.n_embd = 2048;
  s.n_head = 16;
  s.n_head_kv = 2;
  s.head_dim = 256;
  s.n_rot = 64;
  s.n_ff = 0;
  s.n_expert = 256;
  s.n_expert_used = 8;
  s.n_ff_exp = 512;
  s.n_ff_shexp = 512;
  s.ssm_conv_kernel = 4;
  s.ssm_k_heads = 16;
  s.ssm_v_heads = 32;
  s.ssm_head_dim = 128;
  s.full_attention_interval = 4;
  s.n_vocab = 248320;
  s.n_ctx_train = 262144;
  s.rope_base = 1e7f;
  return s;
}

SyntheticModelSpec gpt_oss_20b_spec(int64_t layers) {
  SyntheticModelSpec s;
  s.arch = "gpt-oss";
  s.ftype = "MXFP4_MOE";
  s.n_layer = layers;
  s.n_embd = 2880;
  s.n_head = 64;
  s.n_head_kv = 8;
  s.head_dim = 64;
  s.n_ff = 0;
  s.n_expert = 32;
  s.n_expert_used = 4;
  s.n_ff_exp = 2880;
  s.n_vocab = 201088;
  s.n_ctx_train = 131072;
  s.rope_base = 150000.0f;
  s.rms_eps = 1e-5f;
  s.sliding_window = 128;
  s.yarn_factor = 32.0f;
  s.yarn_original_context = 4096;
  return s;
}

SyntheticModelSpec glm_45_air_spec(int64_t layers) {
  SyntheticModelSpec s;
  s.arch = "glm4moe";
  s.n_layer = layers;
  s.n_embd = 4096;
  s.n_head = 96;
  s.n_head_kv = 8;
  s.head_dim = 128;
  s.n_rot = 64;  // partial rotary 0.5
  s.n_ff = 10944;
  s.n_leading_dense = 1;
  s.qk_norm = false;
  s.n_expert = 128;
  s.n_expert_used = 8;
  s.n_ff_exp = 1408;
  s.n_ff_shexp = 1408;
  s.expert_weights_scale = 1.0f;  // routed_scaling_factor of GLM-4.5-Air
  s.n_vocab = 151552;
  s.n_ctx_train = 131072;
  s.rope_base = 1e6f;
  s.rms_eps = 1e-5f;
  return s;
}

const char* synthetic_preset_names() {
  return "qwen3-30b-a3b, qwen35-35b-a3b, gpt-oss-20b, glm-4.5-air";
}

SyntheticModelSpec synthetic_preset(const std::string& name, int64_t layers) {
  if (name == "qwen3-30b-a3b") return qwen3_30b_a3b_spec(layers > 0 ? layers : 48);
  if (name == "qwen35-35b-a3b") return qwen35_35b_a3b_spec(layers > 0 ? layers : 40);
  if (name == "gpt-oss-20b") return gpt_oss_20b_spec(layers > 0 ? layers : 24);
  if (name == "glm-4.5-air") return glm_45_air_spec(layers > 0 ? layers : 46);
  fail("unknown preset '{}' (known: {})", name, synthetic_preset_names());
}

}  // namespace strata::tools
