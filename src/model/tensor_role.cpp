#include "model/tensor_role.h"

#include <charconv>

namespace strata {
namespace {

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// The tensor's own name inside its block: "blk.3.ffn_up_exps.weight" -> "ffn_up_exps".
std::string_view base_name(std::string_view name) {
  if (name.rfind("blk.", 0) == 0) {
    const size_t dot = name.find('.', 4);
    name = dot == std::string_view::npos ? std::string_view{} : name.substr(dot + 1);
  }
  const size_t suffix = name.rfind('.');
  return suffix == std::string_view::npos ? name : name.substr(0, suffix);
}

}  // namespace

std::string_view tensor_role_name(TensorRole role) {
  switch (role) {
    case TensorRole::routed_experts:
      return "routed experts";
    case TensorRole::shared_experts:
      return "shared experts";
    case TensorRole::router:
      return "router";
    case TensorRole::dense_ffn:
      return "dense ffn";
    case TensorRole::attention:
      return "attention";
    case TensorRole::recurrent:
      return "recurrent (linear attention)";
    case TensorRole::embeddings:
      return "embeddings";
    case TensorRole::output:
      return "output head";
    case TensorRole::norms:
      return "norms";
    case TensorRole::other:
      return "other";
  }
  return "other";
}

TensorRole classify_tensor(std::string_view name) {
  const std::string_view base = base_name(name);
  if (base == "token_embd") return TensorRole::embeddings;
  if (base == "output") return TensorRole::output;
  if (contains(base, "norm")) return TensorRole::norms;
  if (contains(base, "_exps")) return TensorRole::routed_experts;
  if (contains(base, "shexp")) return TensorRole::shared_experts;
  // GLM-4.5's score-correction bias only steers the router's choice.
  if (base == "ffn_gate_inp" || base == "exp_probs_b") return TensorRole::router;
  if (base.rfind("ffn_", 0) == 0) return TensorRole::dense_ffn;
  if (base.rfind("attn_", 0) == 0) return TensorRole::attention;
  if (base.rfind("ssm_", 0) == 0) return TensorRole::recurrent;
  return TensorRole::other;
}

std::optional<int> tensor_layer(std::string_view name) {
  if (name.rfind("blk.", 0) != 0) return std::nullopt;
  int layer = 0;
  const char* begin = name.data() + 4;
  const auto [end, ec] = std::from_chars(begin, name.data() + name.size(), layer);
  if (ec != std::errc() || end == begin || end == name.data() + name.size() || *end != '.')
    return std::nullopt;
  return layer;
}

}  // namespace strata
