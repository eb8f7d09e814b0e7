#include "plan/inventory.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/hparams.h"
#include "model/layer_spec.h"
#include "plan/architecture_tensors.h"
#include "plan/calibration.h"
#include "util/error.h"
#include "util/json_error.h"
#include "util/log.h"

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

double LayerInventory::attended_positions(double context) const {
  return kv_window > 0 ? std::min(context, static_cast<double>(kv_window)) : context;
}

double LayerInventory::causal_pairs(double tokens) const {
  const double w = static_cast<double>(kv_window);
  if (kv_window <= 0 || tokens <= w) return tokens * (tokens + 1) / 2;
  return w * (w + 1) / 2 + (tokens - w) * w;  // past the window each token reads w positions
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

// One expert's slice of a routed-expert bias (gpt-oss).
struct ExpertVector {
  bool down = false;  // ffn_down_exps.bias
  uint64_t slice_bytes = 0;
};

// Expert biases travel with their expert: their bytes join the slice of the expert matrices they
// belong to (read at their rate); they are no matrix product of their own.
void fold_expert_vectors(LayerInventory& l, const std::vector<ExpertVector>& vectors) {
  for (const auto& [down, slice_bytes] : vectors) {
    TypedWeights* target = nullptr;
    for (auto& w : l.expert_slice_by_type) {
      if (w.expert_down == down) {
        target = &w;
        break;
      }
    }
    if (!target && !l.expert_slice_by_type.empty()) target = &l.expert_slice_by_type.front();
    if (target) {
      target->bytes += slice_bytes;
    } else {
      add_typed(l.expert_slice_by_type, GgmlType::F32, slice_bytes, 0, down);
    }
  }
}

// Sums tensors into per-layer totals; routed-expert tensors also get their per-expert slices.
// Tensors of blocks past n_layer (NextN / MTP, never run) count as other bytes.
void summarize(ModelInventory& inv) {
  inv.layers.assign(static_cast<size_t>(inv.n_layer), LayerInventory{});
  // Qwen3.5's Gated DeltaNet layers name their fused q/k/v projection attn_qkv, like attention:
  // a layer with recurrent tensors is the one that keeps a state instead of a KV cache.
  std::vector<bool> has_recurrent(inv.layers.size(), false);
  std::vector<std::vector<ExpertVector>> expert_vectors(inv.layers.size());
  for (auto& t : inv.tensors) {
    if (t.layer < 0 || t.layer >= inv.n_layer) {
      if (t.role == TensorRole::embeddings) {
        inv.embeddings_bytes += t.bytes;
      } else if (t.role == TensorRole::output || t.name == kOutputNormTensor) {
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
        const bool down = t.name.find("ffn_down_exps") != std::string::npos;
        if (!t.matrix) {
          expert_vectors[static_cast<size_t>(t.layer)].push_back({down, t.expert_slice_bytes});
          continue;
        }
        add_typed(l.expert_slice_by_type, t.type, t.expert_slice_bytes, t.elements / inv.n_expert,
                  down);
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
    fold_expert_vectors(inv.layers[i], expert_vectors[i]);
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
  // Mixtral-style llama files give the experts' width as feed_forward_length.
  const int64_t n_ff = inv.n_expert > 0 ? file.find_int(p + "feed_forward_length").value_or(0) : 0;
  inv.n_ff_exp = static_cast<int>(file.find_int(p + "expert_feed_forward_length").value_or(n_ff));
  inv.n_ctx_train = file.find_int(p + "context_length").value_or(0);
  const int blocks = inv.n_layer;
  STRATA_CHECK(blocks > 0 && blocks < 100000, "{}: {}block_count: expected > 0, found {}",
               file.name(), p, blocks);
  // GLM-4.5's NextN block is counted in block_count; plain decoding never runs it.
  const int64_t nextn = file.find_int(p + "nextn_predict_layers").value_or(0);
  STRATA_CHECK(nextn >= 0 && nextn < blocks, "{}: {}nextn_predict_layers is {} of {} blocks",
               file.name(), p, nextn, blocks);
  inv.n_layer = blocks - static_cast<int>(nextn);
  for (const auto& t : file.tensors()) {
    InventoryTensor it;
    it.name = t.name;
    it.role = classify_tensor(t.name);
    it.layer = tensor_layer(t.name).value_or(-1);
    it.bytes = t.bytes;
    it.elements = t.elements();
    it.type = t.type;
    // Biases are added, not multiplied (gpt-oss's per-expert ones are 2-D: [n_ff, n_expert]).
    const bool bias = t.name.size() > 5 && t.name.compare(t.name.size() - 5, 5, ".bias") == 0;
    it.matrix = !bias && t.shape.size() >= 2 && t.shape[1] > 1;
    it.n_dims = static_cast<int>(t.shape.size());
    it.row_length = t.row_length();
    if (it.role == TensorRole::embeddings && t.shape.size() >= 2) inv.n_vocab = t.shape[1];
    STRATA_CHECK(it.layer < blocks, "{}: tensor {} is in layer {}, but the model has {}",
                 file.name(), t.name, it.layer, blocks);
    inv.tensors.push_back(std::move(it));
  }
  summarize(inv);
  // gpt-oss: its sliding layers attend over a window (the loader's pattern).
  if (inv.arch == "gpt-oss") {
    const int64_t window = file.find_int(p + "attention.sliding_window").value_or(0);
    for (size_t il = 0; il < inv.layers.size(); ++il)
      inv.layers[il].kv_window = sliding_layer_window(static_cast<int64_t>(il), window);
  }
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

uint64_t fixed_type_bytes(GgmlType type, int64_t elements) {
  const GgmlTypeInfo& info = ggml_type_info(type);
  return static_cast<uint64_t>(elements / info.block_elems * info.block_bytes);
}

}  // namespace

ModelInventory inventory_from_architecture(const ArchitectureSpec& s, const WeightSize& size) {
  STRATA_CHECK(s.n_layer > 0 && s.n_embd > 0 && s.n_head_kv > 0 && s.head_dim > 0,
               "architecture {}: layers, hidden size, KV heads and head_dim must be positive",
               s.name);
  STRATA_CHECK((size.bits_per_weight > 0) != (size.file_bytes > 0),
               "architecture {}: give either bits per weight or the file size", s.name);
  const auto pending = architecture_tensors(s);
  // Bytes that do not depend on the quantization: f32 vectors and routers, fixed-type experts.
  int64_t quantized = 0, plain = 0;
  double fixed_bytes = 0;
  for (const auto& t : pending) {
    if (t.fixed_type) {
      fixed_bytes += static_cast<double>(fixed_type_bytes(*t.fixed_type, t.elements));
    } else {
      (t.quantized ? quantized : plain) += t.elements;
    }
  }
  double bpw = size.bits_per_weight;
  if (size.file_bytes > 0) {
    // Metadata (tokenizer, ~5-10 MB) is ignored: under 0.1% of these files.
    const double kept_bytes = 4.0 * static_cast<double>(plain) + fixed_bytes;
    STRATA_CHECK(static_cast<double>(size.file_bytes) > kept_bytes,
                 "architecture {}: a file of {} bytes cannot hold its {} bytes of f32 and "
                 "fixed-type tensors",
                 s.name, size.file_bytes, kept_bytes);
    bpw =
        (static_cast<double>(size.file_bytes) - kept_bytes) * 8.0 / static_cast<double>(quantized);
  }
  if (bpw < 1.5 || bpw > 16.5) {
    log::warn(
        "architecture {}: {:.2f} bits per weight is no GGUF quantization (they hold 1.5 to "
        "16.5): check the size given (G means GiB, GB 10^9 bytes)",
        s.name, bpw);
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
    // The type whose measured rates price these bytes on a calibrated CPU.
    if (t.fixed_type) {
      it.type = *t.fixed_type;
      it.bytes = fixed_type_bytes(it.type, t.elements);
    } else if (t.quantized) {
      it.type = quant_type;
      it.bytes = static_cast<uint64_t>(std::llround(static_cast<double>(t.elements) * bpw / 8.0));
    } else {
      it.type = GgmlType::F32;
      it.bytes = static_cast<uint64_t>(t.elements) * 4;
    }
    it.matrix = t.matrix;
    it.n_dims = t.n_dims;
    it.row_length = t.row_length;
    if (t.role == TensorRole::routed_experts && s.n_expert > 0) {
      // Whole per-expert slices, as in real files (a slice is rows of whole quant blocks).
      const auto n = static_cast<uint64_t>(s.n_expert);
      it.bytes = (it.bytes + n / 2) / n * n;
    }
    inv.tensors.push_back(std::move(it));
  }
  summarize(inv);
  for (size_t il = 0; il < inv.layers.size(); ++il)
    inv.layers[il].kv_window = sliding_layer_window(static_cast<int64_t>(il), s.sliding_window);
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

void load_expert_popularity(ModelInventory& inv, const std::string& path,
                            const std::string& model_path) {
  std::ifstream in(path);
  STRATA_CHECK(in.good(), "expert profile {}: cannot open", path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    fail("expert profile {}: not valid JSON: {}", path, plain_json_error(e.what()));
  }
  if (!model_path.empty() && j.is_object() && j.contains("model") && j["model"].is_string()) {
    const auto name = [](const std::string& p) {
      return std::filesystem::path(p).filename().string();
    };
    const std::string recorded = j["model"].get<std::string>();
    if (name(recorded) != name(model_path)) {
      log::warn(
          "expert profile {} was recorded on {}, and this is {}: its expert popularity is "
          "another model's unless they are the same weights",
          path, name(recorded), name(model_path));
    }
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
