#include "model/hparams.h"

#include "util/error.h"
#include "util/log.h"

namespace strata {
namespace {

int64_t positive(const GgufFile& file, const std::string& key, int64_t value) {
  if (value <= 0) fail("{}: {} must be positive, found {}", file.name(), key, value);
  return value;
}

// YaRN from "{arch}.rope.scaling.*" (other scaling types are reported and ignored).
void read_rope_scaling(const GgufFile& file, const std::string& arch, ModelHParams& hp) {
  const std::string type = file.find_string(arch + ".rope.scaling.type").value_or("none");
  if (type == "none") return;
  if (type != "yarn") {
    log::warn("{}: {}.rope.scaling.type '{}' is not supported; plain RoPE is used", file.name(),
              arch, type);
    return;
  }
  const double factor = file.get_float(arch + ".rope.scaling.factor");
  STRATA_CHECK(factor >= 1.0, "{}: {}.rope.scaling.factor must be at least 1 for yarn, found {}",
               file.name(), arch, factor);
  hp.yarn.factor = static_cast<float>(factor);
  hp.yarn.original_context = positive(file, arch + ".rope.scaling.original_context_length",
                                      file.get_int(arch + ".rope.scaling.original_context_length"));
  hp.yarn.beta_fast = static_cast<float>(
      file.find_float(arch + ".rope.scaling.yarn_beta_fast").value_or(hp.yarn.beta_fast));
  hp.yarn.beta_slow = static_cast<float>(
      file.find_float(arch + ".rope.scaling.yarn_beta_slow").value_or(hp.yarn.beta_slow));
}

}  // namespace

ModelHParams read_common_hparams(const GgufFile& file, const std::string& arch) {
  ModelHParams hp;
  hp.arch = arch;
  auto get = [&](const std::string& suffix) {
    const std::string key = arch + "." + suffix;
    return positive(file, key, file.get_int(key));
  };
  auto find = [&](const std::string& suffix, int64_t fallback) {
    return file.find_int(arch + "." + suffix).value_or(fallback);
  };
  hp.n_layer = get("block_count");
  hp.n_embd = get("embedding_length");
  hp.n_head = get("attention.head_count");
  hp.n_head_kv = find("attention.head_count_kv", hp.n_head);
  hp.head_dim = find("attention.key_length", hp.n_embd / hp.n_head);
  hp.n_ff = find("feed_forward_length", 0);
  hp.n_expert = find("expert_count", 0);
  hp.n_expert_used = find("expert_used_count", 0);
  hp.n_ff_exp = find("expert_feed_forward_length", 0);
  hp.n_ctx_train = find("context_length", 0);
  hp.rms_eps = static_cast<float>(
      file.find_float(arch + ".attention.layer_norm_rms_epsilon").value_or(1e-6));
  hp.rope_base = static_cast<float>(file.find_float(arch + ".rope.freq_base").value_or(10000.0));
  hp.n_rot = find("rope.dimension_count", hp.head_dim);
  read_rope_scaling(file, arch, hp);

  if (auto v = file.find_int(arch + ".vocab_size")) {
    hp.n_vocab = *v;
  } else if (const GgufArray* tokens = file.find_array("tokenizer.ggml.tokens")) {
    hp.n_vocab = static_cast<int64_t>(tokens->items.size());
  } else if (const GgufTensorInfo* embd = file.find_tensor("token_embd.weight")) {
    hp.n_vocab = embd->shape.size() > 1 ? embd->shape[1] : 0;
  }
  positive(file, arch + ".vocab_size", hp.n_vocab);
  positive(file, arch + ".attention.head_count_kv", hp.n_head_kv);
  positive(file, arch + ".attention.key_length", hp.head_dim);
  if (hp.n_head % hp.n_head_kv != 0) {
    fail("{}: {} attention heads are not a multiple of the {} KV heads", file.name(), hp.n_head,
         hp.n_head_kv);
  }
  if (hp.n_expert > 0 && (hp.n_expert_used <= 0 || hp.n_expert_used > hp.n_expert)) {
    fail("{}: {}.expert_used_count is {}, expected 1..{} (expert_count)", file.name(), arch,
         hp.n_expert_used, hp.n_expert);
  }
  return hp;
}

}  // namespace strata
