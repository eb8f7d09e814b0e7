#pragma once
// Synthetic GGUF models with real architectures, tensor names and metadata, and random weights:
// benchmarks get realistic shapes (e.g. Qwen3-30B-A3B with fewer layers) without downloading.
// Optionally a skewed router, so some experts are hot, as in real MoE traffic.

#include <cstdint>
#include <string>

namespace strata::tools {

struct SyntheticModelSpec {
  std::string arch = "qwen3moe";  // qwen3moe, qwen35moe, qwen3 or llama
  std::string ftype = "Q4_K_M";   // Q4_K_M, or one tensor type for all matrices (Q8_0, IQ4_XS...)
  int64_t n_layer = 2;
  int64_t n_embd = 256;
  int64_t n_head = 4;
  int64_t n_head_kv = 2;
  int64_t head_dim = 64;
  int64_t n_ff = 512;  // dense FFN (qwen3, llama)
  int64_t n_expert = 8;
  int64_t n_expert_used = 2;
  int64_t n_ff_exp = 256;
  // qwen35moe (Gated DeltaNet hybrid): shared expert, GDN heads, attention layer interval.
  int64_t n_ff_shexp = 256;
  int64_t ssm_conv_kernel = 4;
  int64_t ssm_k_heads = 2;    // ssm.group_count
  int64_t ssm_v_heads = 4;    // ssm.time_step_rank
  int64_t ssm_head_dim = 64;  // ssm.state_size (d_k) = d_v
  int64_t full_attention_interval = 4;
  int64_t n_rot = 0;  // rope.dimension_count (0: head_dim)
  int64_t n_vocab = 512;
  int64_t n_ctx_train = 40960;
  float rope_base = 1e6f;
  double hot_fraction = 0.0;  // fraction of experts made hot (0: uniform router)
  double skew = 4.0;          // how strongly the router prefers hot experts
  uint64_t seed = 1;
  // Copy the tokenizer (tokenizer.* keys: vocabulary, merges, chat template) from this GGUF
  // file; the token list is padded with unused tokens up to n_vocab. Empty: no vocabulary.
  std::string vocab_from;
  // Instead: a small built-in byte-level BPE vocabulary (the 256 bytes, no merges, ChatML
  // control tokens, Qwen3's <think> and <tool_call> tags) with a ChatML chat template, so a
  // demo model serves text without any other file. Needs n_vocab >= 264.
  bool byte_vocab = false;
};

// The shape of Qwen3-30B-A3B / Qwen3-Coder-30B-A3B (48 layers) with `layers` layers.
SyntheticModelSpec qwen3_30b_a3b_spec(int64_t layers);

// The shape of Qwen3.5/3.6-35B-A3B (40 layers, without the multi-token-prediction block) with
// `layers` layers.
SyntheticModelSpec qwen35_35b_a3b_spec(int64_t layers);

// Writes the model to `path` (via a temporary file); reports progress on stderr.
void write_synthetic_model(const SyntheticModelSpec& spec, const std::string& path);

}  // namespace strata::tools
