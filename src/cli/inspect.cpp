// `strata inspect FILE.gguf`: what is in a model file, and how much of it is experts.

#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "gguf/gguf_file.h"
#include "model/tensor_role.h"
#include "util/format_bytes.h"

namespace strata::cli {
namespace {

struct Total {
  uint64_t bytes = 0;
  int64_t elements = 0;
  int tensors = 0;
  void add(const GgufTensorInfo& t) {
    bytes += t.bytes;
    elements += t.elements();
    ++tensors;
  }
};

// Hyper-parameters worth a line of their own, as "{arch}.<suffix>" keys.
constexpr std::pair<const char*, const char*> kHyperParameters[] = {
    {"block_count", "layers"},
    {"context_length", "trained context"},
    {"embedding_length", "embedding size"},
    {"feed_forward_length", "dense FFN size"},
    {"expert_count", "experts"},
    {"expert_used_count", "experts used per token"},
    {"expert_feed_forward_length", "expert FFN size"},
    {"expert_shared_feed_forward_length", "shared expert FFN size"},
    {"attention.head_count", "attention heads"},
    {"attention.head_count_kv", "KV heads"},
    {"attention.key_length", "head dim"},
    {"attention.layer_norm_rms_epsilon", "RMSNorm epsilon"},
    {"rope.freq_base", "RoPE base"},
    {"rope.dimension_count", "RoPE dims"},
    {"full_attention_interval", "full attention every"},
    {"vocab_size", "vocabulary"},
};

struct Inspection {
  const GgufFile& file;
  std::string arch;
  std::map<TensorRole, Total> by_role;
  std::map<std::string, Total> by_type;
  Total all;

  explicit Inspection(const GgufFile& f) : file(f), arch(f.architecture()) {
    for (const auto& t : f.tensors()) {
      by_role[classify_tensor(t.name)].add(t);
      by_type[std::string(ggml_type_name(t.type))].add(t);
      all.add(t);
    }
  }

  double percent(uint64_t bytes) const { return all.bytes ? 100.0 * bytes / all.bytes : 0.0; }

  std::vector<std::pair<std::string, std::string>> hyper_parameters() const {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& [suffix, label] : kHyperParameters) {
      if (const GgufValue* v = file.find(arch + "." + suffix)) {
        out.emplace_back(label, v->to_display_string());
      }
    }
    if (!file.find(arch + ".vocab_size")) {
      if (const GgufArray* tokens = file.find_array("tokenizer.ggml.tokens")) {
        out.emplace_back("vocabulary", std::to_string(tokens->items.size()));
      }
    }
    return out;
  }
};

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

void print_text(const Inspection& in, bool show_metadata, bool show_tensors) {
  const GgufFile& f = in.file;
  fmt::print("{}\n", f.name());
  fmt::print("  GGUF v{}, {}, {} tensors, {} metadata keys, alignment {}\n", f.version(),
             format_bytes(f.file_size()), f.tensors().size(), f.metadata().size(), f.alignment());
  fmt::print("  architecture: {}", in.arch.empty() ? "(not declared)" : in.arch);
  if (auto name = f.find_string("general.name")) fmt::print("  ({})", *name);
  fmt::print("\n  parameters: {} ({})\n\n", in.all.elements, format_count(in.all.elements));

  const auto hp = in.hyper_parameters();
  if (!hp.empty()) {
    fmt::print("Hyper-parameters\n");
    for (const auto& [label, value] : hp) fmt::print("  {} {}\n", pad(label + ":", 26), value);
    fmt::print("\n");
  }

  fmt::print("Bytes by role\n");
  for (const auto& [role, total] : in.by_role) {
    fmt::print("  {} {:>12} {:>6.2f}%  {:>5} tensors\n",
               pad(std::string(tensor_role_name(role)), 30), format_bytes(total.bytes),
               in.percent(total.bytes), total.tensors);
  }
  fmt::print("  {} {:>12} {:>6.2f}%  {:>5} tensors\n\n", pad("total", 30),
             format_bytes(in.all.bytes), 100.0, in.all.tensors);

  fmt::print("Bytes by type\n");
  for (const auto& [type, total] : in.by_type) {
    fmt::print("  {} {:>12} {:>6.2f}%  {:>5} tensors\n", pad(type, 30), format_bytes(total.bytes),
               in.percent(total.bytes), total.tensors);
  }

  if (show_metadata) {
    size_t key_width = 4;
    for (const auto& kv : f.metadata()) key_width = std::max(key_width, kv.key.size());
    fmt::print("\nMetadata\n");
    for (const auto& kv : f.metadata()) {
      fmt::print("  {} {:<6} {}\n", pad(kv.key, key_width), gguf_value_type_name(kv.value.type()),
                 kv.value.to_display_string());
    }
  }
  if (show_tensors) {
    size_t name_width = 4;
    for (const auto& t : f.tensors()) name_width = std::max(name_width, t.name.size());
    fmt::print("\nTensors\n  {} {:<8} {:<22} {:>12}  {}\n", pad("name", name_width), "type",
               "shape", "bytes", "role");
    for (const auto& t : f.tensors()) {
      fmt::print("  {} {:<8} {:<22} {:>12}  {}\n", pad(t.name, name_width), ggml_type_name(t.type),
                 t.shape_string(), format_bytes(t.bytes),
                 tensor_role_name(classify_tensor(t.name)));
    }
  }
}

nlohmann::json value_to_json(const GgufValue& v, size_t max_array) {
  if (const auto* s = v.as_string()) return *s;
  if (const auto* a = v.as_array()) {
    nlohmann::json items = nlohmann::json::array();
    for (size_t i = 0; i < a->items.size() && i < max_array; ++i) {
      items.push_back(value_to_json(a->items[i], max_array));
    }
    if (a->items.size() <= max_array) return items;
    return {{"type", "array"},
            {"element_type", gguf_value_type_name(a->element_type)},
            {"length", a->items.size()},
            {"first", items}};
  }
  if (auto b = v.as_bool()) return *b;
  if (v.type() == GgufValueType::f32 || v.type() == GgufValueType::f64) return *v.as_double();
  if (v.type() == GgufValueType::u64) return *v.as_uint();
  return *v.as_int();
}

nlohmann::json totals_json(const Total& t, double percent) {
  return {
      {"bytes", t.bytes}, {"elements", t.elements}, {"tensors", t.tensors}, {"percent", percent}};
}

void print_json(const Inspection& in, size_t max_array) {
  const GgufFile& f = in.file;
  nlohmann::json out;
  out["file"] = f.name();
  out["gguf_version"] = f.version();
  out["file_bytes"] = f.file_size();
  out["alignment"] = f.alignment();
  out["architecture"] = in.arch;
  out["parameters"] = in.all.elements;
  out["tensor_bytes"] = in.all.bytes;
  nlohmann::json hp = nlohmann::json::object();
  for (const auto& [suffix, label] : kHyperParameters) {
    if (const GgufValue* v = f.find(in.arch + "." + suffix)) hp[suffix] = value_to_json(*v, 64);
  }
  out["hyper_parameters"] = hp;
  nlohmann::json metadata = nlohmann::json::object();
  for (const auto& kv : f.metadata()) metadata[kv.key] = value_to_json(kv.value, max_array);
  out["metadata"] = metadata;
  nlohmann::json roles = nlohmann::json::object();
  for (const auto& [role, total] : in.by_role) {
    roles[std::string(tensor_role_name(role))] = totals_json(total, in.percent(total.bytes));
  }
  out["by_role"] = roles;
  nlohmann::json types = nlohmann::json::object();
  for (const auto& [type, total] : in.by_type)
    types[type] = totals_json(total, in.percent(total.bytes));
  out["by_type"] = types;
  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& t : f.tensors()) {
    nlohmann::json row = {{"name", t.name},
                          {"type", ggml_type_name(t.type)},
                          {"shape", t.shape},
                          {"bytes", t.bytes},
                          {"offset", f.data_offset() + t.offset},
                          {"role", tensor_role_name(classify_tensor(t.name))}};
    if (auto layer = tensor_layer(t.name)) row["layer"] = *layer;
    tensors.push_back(std::move(row));
  }
  out["tensors"] = tensors;
  fmt::print("{}\n", out.dump(2));
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  struct Options {
    std::string path;
    bool json = false;
    bool no_metadata = false;
    bool no_tensors = false;
    size_t max_array = 16;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "inspect", "Show a GGUF file's architecture, metadata, tensors and bytes by role and type");
  cmd->add_option("-m,--model,file", options->path, "GGUF model file (FILE or -m FILE)")
      ->required();
  cmd->add_flag("--json", options->json, "Machine-readable JSON output");
  cmd->add_flag("--no-metadata", options->no_metadata, "Omit the metadata listing");
  cmd->add_flag("--no-tensors", options->no_tensors, "Omit the per-tensor table");
  cmd->add_option("--max-array", options->max_array,
                  "Arrays longer than this are summarized in --json output")
      ->capture_default_str();
  cmd->callback([options] {
    const GgufFile file = GgufFile::open(options->path);
    const Inspection inspection(file);
    if (options->json) {
      print_json(inspection, options->max_array);
    } else {
      print_text(inspection, !options->no_metadata, !options->no_tensors);
    }
  });
}

}  // namespace strata::cli
