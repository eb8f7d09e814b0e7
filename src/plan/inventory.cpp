#include "plan/inventory.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "plan/calibration.h"
#include "util/error.h"

namespace strata::plan {

uint64_t ModelInventory::total_bytes() const {
  uint64_t sum = 0;
  for (const auto& t : tensors) sum += t.bytes;
  return sum;
}

uint64_t ModelInventory::routed_expert_bytes() const {
  uint64_t sum = 0;
  for (const auto& l : layers) sum += l.expert_bytes;
  return sum;
}

int ModelInventory::kv_layers() const {
  int n = 0;
  for (const auto& l : layers) n += l.has_kv_cache ? 1 : 0;
  return n;
}

double ModelInventory::layer_kv_bytes_per_token(double kv_bytes_per_element) const {
  return 2.0 * n_head_kv * head_dim * kv_bytes_per_element;  // K and V
}

uint64_t ModelInventory::kv_bytes_per_token(double kv_bytes_per_element) const {
  return static_cast<uint64_t>(
      std::llround(kv_layers() * layer_kv_bytes_per_token(kv_bytes_per_element)));
}

int64_t ModelInventory::active_params() const {
  int64_t sum = output_params;
  for (const auto& l : layers) sum += l.active_params;
  return sum;
}

namespace {

void add_typed(std::vector<TypedWeights>& v, GgmlType type, uint64_t bytes, int64_t elements,
               bool expert_down = false) {
  for (auto& t : v) {
    if (t.type == type && t.expert_down == expert_down) {
      t.bytes += bytes;
      t.elements += elements;
      return;
    }
  }
  v.push_back({type, bytes, elements, expert_down});
}

// Sums tensors into per-layer totals; routed-expert tensors also get their per-expert slices.
void summarize(ModelInventory& inv) {
  inv.layers.assign(static_cast<size_t>(inv.n_layer), LayerInventory{});
  // Qwen3.5's Gated DeltaNet layers name their fused q/k/v projection attn_qkv, like attention:
  // a layer with recurrent tensors is the one that keeps a state instead of a KV cache.
  std::vector<bool> has_recurrent(inv.layers.size(), false);
  for (auto& t : inv.tensors) {
    if (t.layer < 0 || t.layer >= inv.n_layer) {
      if (t.role == TensorRole::embeddings) {
        inv.embeddings_bytes += t.bytes;
      } else if (t.role == TensorRole::output || t.name == "output_norm.weight") {
        inv.output_bytes += t.bytes;
        inv.output_params += t.elements;
        add_typed(inv.output_by_type, t.type, t.bytes, t.elements);
      } else {
        inv.other_bytes += t.bytes;
      }
      continue;
    }
    LayerInventory& l = inv.layers[static_cast<size_t>(t.layer)];
    switch (t.role) {
      case TensorRole::routed_experts: {
        STRATA_CHECK(inv.n_expert > 0, "{}: routed-expert tensor in a model without experts",
                     t.name);
        t.n_expert = inv.n_expert;
        t.expert_slice_bytes = t.bytes / static_cast<uint64_t>(inv.n_expert);
        l.expert_bytes += t.bytes;
        l.expert_slice_bytes += t.expert_slice_bytes;
        l.active_params += t.elements / inv.n_expert * inv.n_expert_used;
        add_typed(l.expert_slice_by_type, t.type, t.expert_slice_bytes, t.elements / inv.n_expert,
                  t.name.find("ffn_down_exps") != std::string::npos);
        l.expert_matrices += 1;
        continue;
      }
      case TensorRole::router:
        l.router_bytes += t.bytes;
        break;
      case TensorRole::shared_experts:
        l.shared_expert_bytes += t.bytes;
        break;
      case TensorRole::dense_ffn:
        l.dense_ffn_bytes += t.bytes;
        break;
      default:
        l.attention_bytes += t.bytes;
        break;
    }
    l.active_params += t.elements;
    add_typed(l.dense_by_type, t.type, t.bytes, t.matrix ? t.elements : 0);
    l.dense_matrices += t.matrix ? 1 : 0;
    if (t.role == TensorRole::recurrent) has_recurrent[static_cast<size_t>(t.layer)] = true;
  }
  for (size_t i = 0; i < inv.layers.size(); ++i) {
    inv.layers[i].has_kv_cache = !has_recurrent[i];
  }
  // Tied embeddings: the LM head reads the whole embedding matrix every token.
  bool has_output = false;
  for (const auto& t : inv.tensors) has_output |= t.role == TensorRole::output;
  if (!has_output) {
    for (const auto& t : inv.tensors) {
      if (t.role == TensorRole::embeddings) {
        inv.output_params += t.elements;
        add_typed(inv.output_by_type, t.type, t.bytes, t.elements);
      }
    }
    inv.output_bytes += inv.embeddings_bytes;
    inv.embeddings_bytes = 0;
  }
  inv.popularity.assign(inv.layers.size(),
                        std::vector<double>(static_cast<size_t>(std::max(inv.n_expert, 0)),
                                            inv.n_expert > 0 ? 1.0 / inv.n_expert : 0.0));
}

}  // namespace

ModelInventory inventory_from_gguf(const GgufFile& file) {
  ModelInventory inv;
  inv.arch = file.architecture();
  STRATA_CHECK(!inv.arch.empty(), "{}: general.architecture is missing", file.name());
  inv.name = file.find_string("general.name").value_or(inv.arch);
  inv.source = file.name();
  const std::string p = inv.arch + ".";
  inv.n_layer = static_cast<int>(file.get_int(p + "block_count"));
  inv.n_embd = static_cast<int>(file.get_int(p + "embedding_length"));
  inv.n_head = static_cast<int>(file.find_int(p + "attention.head_count").value_or(0));
  inv.n_head_kv =
      static_cast<int>(file.find_int(p + "attention.head_count_kv").value_or(inv.n_head));
  inv.head_dim = static_cast<int>(
      file.find_int(p + "attention.key_length").value_or(inv.n_head ? inv.n_embd / inv.n_head : 0));
  inv.n_expert = static_cast<int>(file.find_int(p + "expert_count").value_or(0));
  inv.n_expert_used = static_cast<int>(file.find_int(p + "expert_used_count").value_or(0));
  inv.n_ff_exp = static_cast<int>(file.find_int(p + "expert_feed_forward_length").value_or(0));
  inv.n_ctx_train = file.find_int(p + "context_length").value_or(0);
  STRATA_CHECK(inv.n_layer > 0 && inv.n_layer < 100000, "{}: {}block_count: expected > 0, found {}",
               file.name(), p, inv.n_layer);
  for (const auto& t : file.tensors()) {
    InventoryTensor it;
    it.name = t.name;
    it.role = classify_tensor(t.name);
    it.layer = tensor_layer(t.name).value_or(-1);
    it.bytes = t.bytes;
    it.elements = t.elements();
    it.type = t.type;
    it.matrix = t.shape.size() >= 2 && t.shape[1] > 1;
    if (it.role == TensorRole::embeddings && t.shape.size() >= 2) inv.n_vocab = t.shape[1];
    STRATA_CHECK(it.layer < inv.n_layer, "{}: tensor {} is in layer {}, but the model has {}",
                 file.name(), t.name, it.layer, inv.n_layer);
    inv.tensors.push_back(std::move(it));
  }
  summarize(inv);
  // Recurrent state per sequence: d_inner x d_state f32 (Gated DeltaNet / Mamba keys).
  const int64_t d_inner = file.find_int(p + "ssm.inner_size").value_or(0);
  const int64_t d_state = file.find_int(p + "ssm.state_size").value_or(0);
  const uint64_t state = static_cast<uint64_t>(d_inner * d_state * 4);
  if (inv.kv_layers() < inv.n_layer) {
    inv.recurrent_v_dim = static_cast<int>(d_inner);
    inv.recurrent_d_k = static_cast<int>(d_state);
    inv.recurrent_k_dim =
        static_cast<int>(file.find_int(p + "ssm.group_count").value_or(0) * d_state);
  }
  for (auto& l : inv.layers) {
    if (!l.has_kv_cache) l.recurrent_state_bytes = state;
  }
  return inv;
}

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

struct PendingTensor {
  std::string name;
  TensorRole role;
  int layer;
  int64_t elements;
  bool quantized;  // matrices take the quant's bits; vectors, routers and convs stay f32
};

std::vector<PendingTensor> architecture_tensors(const ArchitectureSpec& s) {
  std::vector<PendingTensor> out;
  const int64_t e = s.n_embd;
  auto add = [&](int layer, const std::string& base, int64_t elements, bool quantized) {
    const std::string name =
        (layer >= 0 ? "blk." + std::to_string(layer) + "." : std::string()) + base + ".weight";
    out.push_back({name, classify_tensor(name), layer, elements, quantized});
  };
  add(-1, "token_embd", e * s.n_vocab, true);
  for (int l = 0; l < s.n_layer; ++l) {
    add(l, "attn_norm", e, false);
    const bool full = s.full_attention_interval <= 1 || (l + 1) % s.full_attention_interval == 0;
    if (full) {
      const int64_t q = int64_t{s.n_head} * s.head_dim, kv = int64_t{s.n_head_kv} * s.head_dim;
      add(l, "attn_q", e * q * (s.attention_output_gate ? 2 : 1), true);
      add(l, "attn_k", e * kv, true);
      add(l, "attn_v", e * kv, true);
      add(l, "attn_output", q * e, true);
      add(l, "attn_q_norm", s.head_dim, false);
      add(l, "attn_k_norm", s.head_dim, false);
    } else {
      const int64_t k = int64_t{s.linear_n_k_heads} * s.linear_head_dim;
      const int64_t v = int64_t{s.linear_n_v_heads} * s.linear_head_dim;
      add(l, "ssm_in", e * (2 * k + 2 * v), true);  // q, k, v, z
      add(l, "ssm_beta_alpha", e * 2 * s.linear_n_v_heads, true);
      add(l, "ssm_conv1d", (2 * k + v) * s.linear_conv_kernel, false);
      add(l, "ssm_out", v * e, true);
      add(l, "ssm_a", s.linear_n_v_heads, false);
      add(l, "ssm_dt", s.linear_n_v_heads, false);
      add(l, "ssm_norm", s.linear_head_dim, false);
    }
    add(l, "post_attention_norm", e, false);
    add(l, "ffn_gate_inp", e * s.n_expert, false);
    const int64_t exp = e * s.n_ff_exp * s.n_expert;
    add(l, "ffn_gate_exps", exp, true);
    add(l, "ffn_up_exps", exp, true);
    add(l, "ffn_down_exps", exp, true);
    if (s.n_ff_shexp > 0) {
      add(l, "ffn_gate_inp_shexp", e, false);
      add(l, "ffn_gate_shexp", e * s.n_ff_shexp, true);
      add(l, "ffn_up_shexp", e * s.n_ff_shexp, true);
      add(l, "ffn_down_shexp", e * s.n_ff_shexp, true);
    }
  }
  add(-1, "output_norm", e, false);
  if (!s.tied_embeddings) add(-1, "output", e * s.n_vocab, true);
  return out;
}

}  // namespace

std::optional<ArchitectureSpec> architecture_preset(std::string_view name) {
  if (name == "qwen3-30b-a3b") return qwen3_30b_a3b("Qwen3-30B-A3B", 40960);
  if (name == "qwen3-coder-30b-a3b") return qwen3_30b_a3b("Qwen3-Coder-30B-A3B", 262144);
  if (name == "qwen3.5-35b-a3b") return qwen35_35b_a3b();
  return std::nullopt;
}

std::vector<std::string> architecture_preset_names() {
  return {"qwen3-30b-a3b", "qwen3-coder-30b-a3b", "qwen3.5-35b-a3b"};
}

ModelInventory inventory_from_architecture(const ArchitectureSpec& s, const WeightSize& size) {
  STRATA_CHECK(s.n_layer > 0 && s.n_embd > 0 && s.n_head_kv > 0 && s.head_dim > 0,
               "architecture {}: layers, hidden size, KV heads and head_dim must be positive",
               s.name);
  STRATA_CHECK((size.bits_per_weight > 0) != (size.file_bytes > 0),
               "architecture {}: give either bits per weight or the file size", s.name);
  const auto pending = architecture_tensors(s);
  int64_t quantized = 0, plain = 0;
  for (const auto& t : pending) (t.quantized ? quantized : plain) += t.elements;
  double bpw = size.bits_per_weight;
  if (size.file_bytes > 0) {
    // Metadata (tokenizer, ~5-10 MB) is ignored: under 0.1% of these files.
    const double f32_bytes = 4.0 * static_cast<double>(plain);
    STRATA_CHECK(static_cast<double>(size.file_bytes) > f32_bytes,
                 "architecture {}: a file of {} bytes cannot hold {} f32 parameters", s.name,
                 size.file_bytes, plain);
    bpw = (static_cast<double>(size.file_bytes) - f32_bytes) * 8.0 / static_cast<double>(quantized);
  }
  ModelInventory inv;
  inv.name = s.name;
  inv.arch = s.arch;
  inv.source = size.file_bytes > 0
                   ? fmt::format("architecture preset, {:.2f} GB file ({:.2f} bits per weight)",
                                 size.file_bytes / 1e9, bpw)
                   : fmt::format("architecture preset at {:.2f} bits per weight", bpw);
  inv.n_layer = s.n_layer;
  inv.n_embd = s.n_embd;
  inv.n_head = s.n_head;
  inv.n_head_kv = s.n_head_kv;
  inv.head_dim = s.head_dim;
  inv.n_expert = s.n_expert;
  inv.n_expert_used = s.n_expert_used;
  inv.n_ff_exp = s.n_ff_exp;
  inv.n_vocab = s.n_vocab;
  const GgmlType quant_type = type_for_bits_per_weight(bpw);
  inv.n_ctx_train = s.n_ctx_train;
  for (const auto& t : pending) {
    InventoryTensor it;
    it.name = t.name;
    it.role = t.role;
    it.layer = t.layer;
    it.elements = t.elements;
    it.bytes = t.quantized ? static_cast<uint64_t>(std::llround(t.elements * bpw / 8.0))
                           : static_cast<uint64_t>(t.elements) * 4;
    // The type whose measured rates price these bytes on a calibrated CPU.
    it.type = t.quantized ? quant_type : GgmlType::F32;
    it.matrix = t.quantized || (t.role == TensorRole::router && t.elements > s.n_embd);
    if (t.role == TensorRole::routed_experts && s.n_expert > 0) {
      // Whole per-expert slices, as in real files (a slice is rows of whole quant blocks).
      const auto n = static_cast<uint64_t>(s.n_expert);
      it.bytes = (it.bytes + n / 2) / n * n;
    }
    inv.tensors.push_back(std::move(it));
  }
  summarize(inv);
  // Gated DeltaNet state: per value head a head_dim x head_dim f32 matrix, plus the conv window.
  const uint64_t state = uint64_t{4} * s.linear_n_v_heads * s.linear_head_dim * s.linear_head_dim +
                         uint64_t{4} * (s.linear_conv_kernel - 1) *
                             (2 * uint64_t(s.linear_n_k_heads) + s.linear_n_v_heads) *
                             s.linear_head_dim;
  for (auto& l : inv.layers) {
    if (!l.has_kv_cache) l.recurrent_state_bytes = state;
  }
  if (inv.kv_layers() < inv.n_layer) {
    inv.recurrent_k_dim = s.linear_n_k_heads * s.linear_head_dim;
    inv.recurrent_v_dim = s.linear_n_v_heads * s.linear_head_dim;
    inv.recurrent_d_k = s.linear_head_dim;
  }
  return inv;
}

void load_expert_popularity(ModelInventory& inv, const std::string& path) {
  std::ifstream in(path);
  STRATA_CHECK(in.good(), "expert profile {}: cannot open", path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    fail("expert profile {}: not valid JSON: {}", path, e.what());
  }
  const nlohmann::json& rows =
      j.is_object() && j.contains("expert_counts") ? j["expert_counts"] : j;
  STRATA_CHECK(rows.is_array() && rows.size() == inv.layers.size(),
               "expert profile {}: expected {} layers of counts (\"expert_counts\": [[...], ...]), "
               "found {}",
               path, inv.layers.size(),
               rows.is_array() ? std::to_string(rows.size()) : rows.type_name());
  std::vector<std::vector<double>> pop(inv.layers.size());
  for (size_t l = 0; l < rows.size(); ++l) {
    const auto& row = rows[l];
    STRATA_CHECK(row.is_array() && row.size() == static_cast<size_t>(inv.n_expert),
                 "expert profile {}: layer {}: expected {} counts, found {}", path, l, inv.n_expert,
                 row.is_array() ? std::to_string(row.size()) : row.type_name());
    double sum = 0;
    for (const auto& v : row) {
      STRATA_CHECK(v.is_number() && v.get<double>() >= 0,
                   "expert profile {}: layer {}: counts must be non-negative numbers", path, l);
      sum += v.get<double>();
    }
    for (const auto& v : row) {
      pop[l].push_back(sum > 0 ? v.get<double>() / sum : 1.0 / inv.n_expert);
    }
  }
  inv.popularity = std::move(pop);
  inv.popularity_source = path;
}

}  // namespace strata::plan
