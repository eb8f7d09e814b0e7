#include "model/model.h"

#include <fmt/format.h>

#include "model/archs/archs.h"
#include "model/decoder_model.h"
#include "util/error.h"

namespace strata {
namespace {

struct Architecture {
  const char* name;
  std::unique_ptr<Model> (*make)(GgufFile);
};

constexpr Architecture kArchitectures[] = {
    {"qwen3moe", archs::make_qwen3moe},   {"qwen3", archs::make_qwen3},
    {"llama", archs::make_llama},         {"qwen35moe", archs::make_qwen35moe},
    {"gpt-oss", archs::make_gpt_oss},     {"glm4moe", archs::make_glm4moe},
    {"qwen3next", archs::make_qwen3next},
};

}  // namespace

namespace archs {

ModelSpec same_layers(int64_t n_layer, const LayerSpec& layer) {
  ModelSpec spec;
  spec.layers.assign(static_cast<size_t>(std::max<int64_t>(n_layer, 0)), layer);
  return spec;
}

std::unique_ptr<Model> make_decoder(GgufFile file, ModelHParams hp, ModelSpec spec) {
  return std::make_unique<DecoderModel>(std::move(file), std::move(hp), std::move(spec));
}

}  // namespace archs

std::vector<std::string> Model::supported_architectures() {
  std::vector<std::string> out;
  for (const auto& a : kArchitectures) out.emplace_back(a.name);
  return out;
}

std::unique_ptr<Model> Model::from_file(GgufFile file) {
  const std::string arch = file.architecture();
  for (const auto& a : kArchitectures) {
    if (arch == a.name) return a.make(std::move(file));
  }
  fail("{}: architecture '{}' is not supported (supported: {})", file.name(),
       arch.empty() ? "(general.architecture missing)" : arch,
       fmt::join(supported_architectures(), ", "));
}

std::vector<Model::LayerDevices> Model::layer_devices() const {
  std::vector<LayerDevices> out(static_cast<size_t>(hparams_.n_layer));
  for (LayerDevices& l : out) {
    l.attention = kCpuDeviceName;
    if (hparams_.n_expert > 0) l.experts = {{kCpuDeviceName, hparams_.n_expert}};
  }
  return out;
}

std::vector<bool> Model::kv_layers() const {
  std::vector<bool> out;
  for (int64_t il = 0; il < hparams_.n_layer; ++il) out.push_back(layer_has_kv(il));
  return out;
}

std::unique_ptr<Model> Model::load(const std::string& path, LoadMode mode) {
  return from_file(GgufFile::open(path, mode));
}

}  // namespace strata
