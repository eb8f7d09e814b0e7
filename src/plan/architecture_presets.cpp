#include "plan/architecture_presets.h"

namespace strata::plan {
namespace {

ArchitectureSpec qwen3_30b_a3b(std::string name, int64_t n_ctx_train) {
  // FIELD "Architecture facts": 48 layers, hidden 2048, 32 query heads, 4 KV heads, head_dim 128,
  // 128 experts, 8 used, expert FFN 768, no shared expert, vocab 151,936; untied output head.
  ArchitectureSpec s;
  s.name = std::move(name);
  s.arch = "qwen3moe";
  s.n_layer = 48;
  s.n_embd = 2048;
  s.n_head = 32;
  s.n_head_kv = 4;
  s.head_dim = 128;
  s.n_expert = 128;
  s.n_expert_used = 8;
  s.n_ff_exp = 768;
  s.n_vocab = 151936;
  s.n_ctx_train = n_ctx_train;
  return s;
}

ArchitectureSpec qwen3_235b_a22b() {
  // The model card's config: 94 layers, hidden 4096, 64 query heads, 4 KV heads, head_dim 128,
  // 128 experts, 8 used, expert FFN 1536, vocab 151,936, 40,960 positions (235 B, 22 B active).
  ArchitectureSpec s = qwen3_30b_a3b("Qwen3-235B-A22B", 40960);
  s.n_layer = 94;
  s.n_embd = 4096;
  s.n_head = 64;
  s.n_ff_exp = 1536;
  return s;
}

ArchitectureSpec qwen35_35b_a3b() {
  // FIELD C1: 40 layers (30 Gated DeltaNet + 10 full attention, one every 4), 256 experts, top-8,
  // hidden 2048. The rest follows the Qwen3-Next design this model card describes (assumed, not
  // in FIELD): 16 query heads, 2 KV heads, head_dim 256, gated attention output; DeltaNet with
  // 16 key heads and 32 value heads of 128; expert FFN 512 plus one shared expert of 512;
  // vocab 248,320. Check: 34.7 B parameters, 2.95 B active per token ("35B-A3B").
  ArchitectureSpec s;
  s.name = "Qwen3.5-35B-A3B";
  s.arch = "qwen35moe";
  s.n_layer = 40;
  s.n_embd = 2048;
  s.n_head = 16;
  s.n_head_kv = 2;
  s.head_dim = 256;
  s.attention_output_gate = true;
  s.n_expert = 256;
  s.n_expert_used = 8;
  s.n_ff_exp = 512;
  s.n_ff_shexp = 512;
  s.n_vocab = 248320;
  s.n_ctx_train = 262144;
  s.full_attention_interval = 4;
  s.linear_n_k_heads = 16;
  s.linear_n_v_heads = 32;
  s.linear_head_dim = 128;
  return s;
}

ArchitectureSpec qwen3_next_80b_a3b() {
  // Hugging Face transformers' Qwen3NextConfig, whose defaults are Qwen/Qwen3-Next-80B-A3B-Instruct
  // (src/transformers/models/qwen3_next/configuration_qwen3_next.py): 48 layers, hidden 2048,
  // 16 query heads, 2 KV heads, head_dim 256 (gated attention output), linear attention every
  // layer but each 4th (16 key heads and 32 value heads of 128, conv kernel 4), 512 experts,
  // top-10, expert FFN 512, one shared expert of 512, vocab 151,936, untied output; context
  // 262,144 (model card). Check: 79.7 B parameters ("80B"), 3.25 B active per token without the
  // LM head (3.56 B with it; "A3B").
  ArchitectureSpec s = qwen35_35b_a3b();
  s.name = "Qwen3-Next-80B-A3B";
  s.arch = "qwen3next";
  s.n_layer = 48;
  s.n_expert = 512;
  s.n_expert_used = 10;
  s.n_vocab = 151936;
  s.linear_projections = GdnProjections::fused_ba;
  return s;
}

ArchitectureSpec gpt_oss(std::string name, int n_layer, int n_expert) {
  // transformers' GptOssConfig (configuration_gpt_oss.py, whose defaults are the 120b's) and the
  // config.json of gpt-oss-20b (as its fine-tunes on Hugging Face carry it): hidden 2880, 64 query
  // heads, 8 KV heads, head_dim 64, q/k/v/o biases, one sink per head, sliding window 128 on even
  // layers, expert FFN 2880, top-4, router and expert biases, vocab 201,088, untied output, context
  // 131,072; 24 layers x 32 experts (20b), 36 x 128 (120b). The experts ship in MXFP4 (4.25 bits
  // per weight). Check against the model card (arXiv 2508.10925): 20.91 B total / 3.61 B active
  // (card: 20.9 B / 3.6 B), 116.83 B / 5.13 B (card: 116.8 B / 5.1 B).
  ArchitectureSpec s;
  s.name = std::move(name);
  s.arch = "gpt-oss";
  s.n_layer = n_layer;
  s.n_embd = 2880;
  s.n_head = 64;
  s.n_head_kv = 8;
  s.head_dim = 64;
  s.qk_norm = false;
  s.qkv_bias = s.output_bias = s.attention_sinks = true;
  s.sliding_window = 128;
  s.n_expert = n_expert;
  s.n_expert_used = 4;
  s.n_ff_exp = 2880;
  s.router_bias = s.expert_biases = true;
  s.expert_type = GgmlType::MXFP4;
  s.n_vocab = 201088;
  s.n_ctx_train = 131072;
  return s;
}

ArchitectureSpec glm_45_air() {
  // zai-org/GLM-4.5-Air config.json (as mirrored by its fine-tunes, e.g. PrimeIntellect/
  // INTELLECT-3-Base): 46 layers + 1 NextN block, hidden 4096, 96 query heads, 8 KV heads,
  // head_dim 128, q/k/v biases, no q/k norm, partial rotary 0.5; first layer dense (FFN 10944);
  // 128 experts, top-8, expert FFN 1408, one shared expert of 1408, sigmoid routing with a
  // score-correction bias; vocab 151,552, untied output, context 131,072. Check: 106.85 B
  // parameters without the NextN block (model card: 106 B), 12.18 B active without the LM head
  // (12.80 B with it; card: 12 B).
  ArchitectureSpec s;
  s.name = "GLM-4.5-Air";
  s.arch = "glm4moe";
  s.n_layer = 46;
  s.n_nextn_layer = 1;
  s.n_embd = 4096;
  s.n_head = 96;
  s.n_head_kv = 8;
  s.head_dim = 128;
  s.qk_norm = false;
  s.qkv_bias = true;
  s.n_leading_dense = 1;
  s.n_ff_dense = 10944;
  s.n_expert = 128;
  s.n_expert_used = 8;
  s.n_ff_exp = 1408;
  s.n_ff_shexp = 1408;
  s.shared_expert_gate = false;
  s.selection_bias = true;
  s.n_vocab = 151552;
  s.n_ctx_train = 131072;
  return s;
}

}  // namespace

std::optional<ArchitectureSpec> architecture_preset(std::string_view name) {
  if (name == "qwen3-30b-a3b") return qwen3_30b_a3b("Qwen3-30B-A3B", 40960);
  if (name == "qwen3-coder-30b-a3b") return qwen3_30b_a3b("Qwen3-Coder-30B-A3B", 262144);
  if (name == "qwen3-235b-a22b") return qwen3_235b_a22b();
  if (name == "qwen3.5-35b-a3b") return qwen35_35b_a3b();
  if (name == "qwen3-next-80b-a3b") return qwen3_next_80b_a3b();
  if (name == "gpt-oss-20b") return gpt_oss("gpt-oss-20b", 24, 32);
  if (name == "gpt-oss-120b") return gpt_oss("gpt-oss-120b", 36, 128);
  if (name == "glm-4.5-air") return glm_45_air();
  return std::nullopt;
}

std::vector<std::string> architecture_preset_names() {
  return {"qwen3-30b-a3b",      "qwen3-coder-30b-a3b", "qwen3-235b-a22b", "qwen3.5-35b-a3b",
          "qwen3-next-80b-a3b", "gpt-oss-20b",         "gpt-oss-120b",    "glm-4.5-air"};
}

}  // namespace strata::plan
