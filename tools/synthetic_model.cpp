#include "synthetic_model.h"
#include "quant/type_mix.h"

#include <fmt/format.h>

#include <cmath>

#include "gguf/gguf_writer.h"
#include "quant/type_mix.h"
#include "synthetic_layers.h"
#include "synthetic_vocabulary.h"
#include "synthetic_weights.h"
#include "util/error.h"
#include "util/log.h"

namespace strata::tools {
namespace {

bool known_arch(const std::string& a) {
  for (const char* known :
       {"qwen3moe", "qwen35moe", "qwen3next", "gpt-oss", "glm4moe", "mixtral", "qwen3", "llama"}) {
    if (a == known) return true;
  }
  return false;
}

void check_spec(const SyntheticModelSpec& s) {
  STRATA_CHECK(known_arch(s.arch),
               "--arch must be qwen3moe, qwen35moe, qwen3next, gpt-oss, glm4moe, mixtral, qwen3 "
               "or llama, got '{}'",
               s.arch);
  STRATA_CHECK(s.n_layer > 0 && s.n_embd > 0 && s.n_head > 0 && s.n_head_kv > 0 && s.head_dim > 0 &&
                   s.n_vocab > 0,
               "layers, embedding size, heads, head dim and vocabulary must be positive");
  STRATA_CHECK(s.n_head % s.n_head_kv == 0, "{} heads are not a multiple of {} KV heads", s.n_head,
               s.n_head_kv);
  STRATA_CHECK(s.hot_fraction >= 0 && s.hot_fraction <= 1, "--hot-experts must be in [0, 1]");
  if (is_hybrid(s)) {
    STRATA_CHECK(s.ssm_k_heads > 0 && s.ssm_v_heads % s.ssm_k_heads == 0 && s.ssm_head_dim > 0 &&
                     s.ssm_conv_kernel > 0 && s.full_attention_interval > 0 && s.n_ff_shexp > 0,
                 "{}: GDN heads {} / {} of {}, conv {}, interval {}, shared FFN {} are not valid",
                 s.arch, s.ssm_k_heads, s.ssm_v_heads, s.ssm_head_dim, s.ssm_conv_kernel,
                 s.full_attention_interval, s.n_ff_shexp);
  }
  if (s.arch != "qwen3" && s.arch != "llama") {
    STRATA_CHECK(
        s.n_expert > 0 && s.n_expert_used > 0 && s.n_expert_used <= s.n_expert && s.n_ff_exp > 0,
        "experts: {} with {} used and FFN {} is not a valid MoE", s.n_expert, s.n_expert_used,
        s.n_ff_exp);
  }
  if (s.arch == "gpt-oss") {
    STRATA_CHECK(s.sliding_window > 0, "gpt-oss: the sliding window must be positive, got {}",
                 s.sliding_window);
  }
  if (s.arch == "glm4moe") {
    STRATA_CHECK(s.n_leading_dense >= 0 && s.n_leading_dense <= s.n_layer &&
                     (s.n_leading_dense == 0 || s.n_ff > 0) && s.n_ff_shexp > 0 &&
                     s.n_ff_shexp % s.n_ff_exp == 0,
                 "glm4moe: {} leading dense layers of {} (FFN {}), shared FFN {} (a multiple of "
                 "the expert FFN {}) are not valid",
                 s.n_leading_dense, s.n_layer, s.n_ff, s.n_ff_shexp, s.n_ff_exp);
  }
  STRATA_CHECK(s.n_nextn >= 0 && (s.n_nextn == 0 || s.arch == "glm4moe" || s.arch == "qwen35moe"),
               "NextN/MTP blocks ({}) are made for glm4moe and qwen35moe only, not {}", s.n_nextn,
               s.arch);
}

// The hyper-parameter keys the loader of the spec's architecture reads.
void write_hparams(const SyntheticModelSpec& s, const std::string& a, GgufWriter& w) {
  auto u32 = [&](const std::string& key, int64_t v) {
    w.set_u32(a + "." + key, static_cast<uint32_t>(v));
  };
  u32("block_count", s.n_layer + s.n_nextn);  // the NextN blocks count as blocks
  u32("context_length", s.n_ctx_train);
  u32("embedding_length", s.n_embd);
  // Mixtral and gpt-oss files give the experts' width here too (llama has no other key).
  const int64_t n_ff = s.arch == "mixtral" || s.arch == "gpt-oss" ? s.n_ff_exp : s.n_ff;
  if (n_ff > 0) u32("feed_forward_length", n_ff);
  u32("attention.head_count", s.n_head);
  u32("attention.head_count_kv", s.n_head_kv);
  u32("attention.key_length", s.head_dim);
  u32("attention.value_length", s.head_dim);
  w.set_f32(a + ".rope.freq_base", s.rope_base);
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", s.rms_eps);
  u32("vocab_size", s.n_vocab);
  const int64_t n_rot = s.n_rot > 0 ? s.n_rot : s.head_dim;
  if (a == "llama" || a == "glm4moe" || is_hybrid(s)) u32("rope.dimension_count", n_rot);
  if (s.arch == "qwen35moe") {
    // IMROPE sections (text uses one position for all, which reduces to NEOX).
    const int32_t q = static_cast<int32_t>(n_rot / 2);
    w.set(a + ".rope.dimension_sections",
          GgufValue::array(GgufValueType::i32,
                           {GgufValue(int32_t{q - q / 3 - q / 3}), GgufValue(int32_t{q / 3}),
                            GgufValue(int32_t{q / 3}), GgufValue(int32_t{0})}));
  }
  if (is_hybrid(s)) {
    u32("ssm.conv_kernel", s.ssm_conv_kernel);
    u32("ssm.state_size", s.ssm_head_dim);
    u32("ssm.group_count", s.ssm_k_heads);
    u32("ssm.time_step_rank", s.ssm_v_heads);
    u32("ssm.inner_size", s.ssm_v_heads * s.ssm_head_dim);
    u32("full_attention_interval", s.full_attention_interval);
    if (s.n_nextn > 0) u32("nextn_predict_layers", s.n_nextn);
    u32("expert_shared_feed_forward_length", s.n_ff_shexp);
  }
  if (s.arch != "qwen3" && s.arch != "llama") {
    u32("expert_count", s.n_expert);
    u32("expert_used_count", s.n_expert_used);
    if (s.arch != "mixtral") u32("expert_feed_forward_length", s.n_ff_exp);
  }
  if (s.arch == "gpt-oss") {
    u32("attention.sliding_window", s.sliding_window);
    if (s.yarn_factor > 0) {
      w.set_string(a + ".rope.scaling.type", "yarn");
      w.set_f32(a + ".rope.scaling.factor", s.yarn_factor);
      u32("rope.scaling.original_context_length", s.yarn_original_context);
    }
  }
  if (s.arch == "glm4moe") {
    u32("expert_shared_count", s.n_ff_shexp / s.n_ff_exp);
    u32("leading_dense_block_count", s.n_leading_dense);
    w.set_f32(a + ".expert_weights_scale", s.expert_weights_scale);
    w.set_bool(a + ".expert_weights_norm", true);
    u32("expert_gating_func", 2);  // sigmoid
    u32("nextn_predict_layers", s.n_nextn);
  }
}

}  // namespace

void write_synthetic_model(const SyntheticModelSpec& s, const std::string& path) {
  check_spec(s);
  RandomWeights weights(s);
  GgufWriter w;
  const std::string a = s.arch == "mixtral" ? "llama" : s.arch;  // Mixtral is a llama file
  w.set_string("general.architecture", a);
  w.set_string("general.name", fmt::format("synthetic-{}-L{}-{}", s.arch, s.n_layer, s.ftype));
  w.set_string("general.description", "random weights made by strata's synthetic model generator");
  w.set_u32("general.file_type", quant::gguf_file_type(s.ftype));
  w.set_u32("general.quantization_version", 2);
  write_hparams(s, a, w);
  if (s.byte_vocab) {
    write_byte_vocabulary(s.n_vocab, w);
  } else if (s.vocab_from.empty()) {
    w.set_string("tokenizer.ggml.model", "no_vocab");
  } else {
    copy_vocabulary(s.vocab_from, s.n_vocab, w);
  }

  const float embd_bias = s.hot_fraction > 0 ? 1.0f : 0.0f;
  const GgmlType embd_type = tensor_type(s, "token_embd", 0, s.n_embd);
  w.add_tensor(
      "token_embd.weight", embd_type, {s.n_embd, s.n_vocab},
      weights.matrix(embd_type, s.n_embd, s.n_vocab, embd_bias * std::sqrt(float(s.n_embd))));
  w.add_tensor("output_norm.weight", GgmlType::F32, {s.n_embd}, weights.norm(s.n_embd));
  const GgmlType output_type = tensor_type(s, "output", 0, s.n_embd);
  w.add_tensor("output.weight", output_type, {s.n_embd, s.n_vocab},
               weights.matrix(output_type, s.n_embd, s.n_vocab));
  for (int64_t il = 0; il < s.n_layer; ++il) add_block_tensors(s, weights, w, il);
  for (int64_t il = s.n_layer; il < s.n_layer + s.n_nextn; ++il)
    add_nextn_block_tensors(s, weights, w, il);
  log::info("writing {}", path);
  w.write(path);
}

}  // namespace strata::tools
