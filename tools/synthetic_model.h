#pragma once
// Synthetic GGUF models with real architectures, tensor names and metadata, and random weights:
// benchmarks get realistic shapes (e.g. Qwen3-30B-A3B with fewer layers) without downloading.
// Optionally a skewed router, so some experts are hot, as in real MoE traffic.

#include <cstdint>
#include <string>

namespace strata::tools {

struct SyntheticModelSpec {
  // qwen3moe, qwen35moe, qwen3next, gpt-oss, glm4moe, mixtral (a llama file with experts),
  // qwen3 or llama (dense).
  std::string arch = "qwen3moe";
  // Q4_K_M (mixed, as GGUF quantizers make it), MXFP4_MOE (routed experts MXFP4, every other
  // matrix Q8_0, as the published gpt-oss files), or one tensor type for all matrices.
  std::string ftype = "Q4_K_M";
  int64_t n_layer = 2;
  int64_t n_embd = 256;
  int64_t n_head = 4;
  int64_t n_head_kv = 2;
  int64_t head_dim = 64;
  int64_t n_ff = 512;  // dense FFN (qwen3, llama, glm4moe's leading dense layers)
  int64_t n_expert = 8;
  int64_t n_expert_used = 2;
  int64_t n_ff_exp = 256;
  // Shared expert (qwen35moe, qwen3next; glm4moe: a multiple of n_ff_exp).
  int64_t n_ff_shexp = 256;
  // Gated DeltaNet hybrids (qwen35moe, qwen3next): GDN heads, attention layer interval.
  int64_t ssm_conv_kernel = 4;
  int64_t ssm_k_heads = 2;    // ssm.group_count
  int64_t ssm_v_heads = 4;    // ssm.time_step_rank
  int64_t ssm_head_dim = 64;  // ssm.state_size (d_k) = d_v
  int64_t full_attention_interval = 4;
  int64_t n_rot = 0;  // rope.dimension_count (0: head_dim)
  int64_t n_vocab = 512;
  int64_t n_ctx_train = 40960;
  float rope_base = 1e6f;
  float rms_eps = 1e-6f;
  // gpt-oss: the even layers' attention window; YaRN (0: none) over the original context.
  int64_t sliding_window = 128;
  float yarn_factor = 0.0f;
  int64_t yarn_original_context = 4096;
  // glm4moe: dense layers before the MoE ones, per-head q/k norms (GLM-4.5-Air has none), the
  // routed weights' scale.
  int64_t n_leading_dense = 1;
  bool qk_norm = true;
  float expert_weights_scale = 1.0f;
  // glm4moe, qwen35moe: NextN / MTP (multi-token prediction) blocks after the layers, as GLM-4.5's
  // files and Qwen3.5 files converted with their MTP weights keep one (block n_layer: a MoE
  // layer, full attention on the hybrid, plus nextn.eh_proj / enorm / hnorm / shared_head_norm).
  int64_t n_nextn = 0;
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

// The shape of gpt-oss-20b (24 layers) with `layers` layers; ftype MXFP4_MOE as published.
SyntheticModelSpec gpt_oss_20b_spec(int64_t layers);

// The shape of GLM-4.5-Air (46 layers, without the NextN block) with `layers` layers.
SyntheticModelSpec glm_45_air_spec(int64_t layers);

// The preset of that name ("qwen3-30b-a3b", "qwen35-35b-a3b", "gpt-oss-20b", "glm-4.5-air") with
// `layers` layers (0: all); throws for an unknown name.
SyntheticModelSpec synthetic_preset(const std::string& name, int64_t layers);
const char* synthetic_preset_names();  // for help and errors

// Writes the model to `path` (via a temporary file); reports progress on stderr.
void write_synthetic_model(const SyntheticModelSpec& spec, const std::string& path);

}  // namespace strata::tools
