#include "backend/vulkan/gpu_stage.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace strata::vk {

std::vector<StageLayers> stage_layers(const std::vector<int>& layer_device, int64_t n_layer) {
  std::vector<StageLayers> out;
  for (int64_t il = 0; il < n_layer; ++il) {
    const int d = layer_device.empty() ? 0 : layer_device[static_cast<size_t>(il)];
    if (out.empty() || out.back().device != d) out.push_back({d, il, il});
    out.back().last = il + 1;
  }
  if (out.empty()) out.push_back({0, 0, 0});  // a model without layers still has a head
  return out;
}

namespace {

std::vector<bool> kv_layers_within(const std::vector<bool>& kv_layers, const StageLayers& s) {
  std::vector<bool> out(kv_layers.size(), false);
  for (int64_t il = s.first; il < s.last; ++il)
    out[static_cast<size_t>(il)] = kv_layers[static_cast<size_t>(il)];
  return out;
}

}  // namespace

GpuStage::GpuStage(std::shared_ptr<Device> device, const ModelHParams& hp, StageLayers layers,
                   const std::vector<bool>& kv_layers, int64_t shared_ff)
    : device_(std::move(device)),
      hp_(hp),
      layers_(layers),
      step(*device_),
      normed_in(*device_, "normed states") {
  kv = std::make_unique<DeviceKv>(*device_, hp.n_head_kv, hp.head_dim,
                                  kv_layers_within(kv_layers, layers_));
  cmd = std::make_unique<CommandList>(*device_);
  cmd->mark_model_step();
  attention = std::make_unique<GpuAttention>(*device_, hp);
  ffn = std::make_unique<GpuFfn>(*device_, hp, shared_ff);
}

void GpuStage::ensure(int64_t n) {
  attention->ensure(n);
  ffn->begin_step(n);
  if (n <= tokens_) return;
  const int64_t cap = std::max(n, 2 * tokens_);
  const uint64_t bytes = static_cast<uint64_t>(cap * hp_.n_embd) * 4;
  const auto f32 = [&](const char* what) {
    return device_->allocate(bytes, MemoryKind::device, fmt::format("{} for {} tokens", what, cap));
  };
  x = f32("hidden states");
  normed = f32("normed states");
  delta = f32("layer output");
  tokens_ = cap;
  hop_ = {};  // allocated when a hop needs it
}

const Buffer& GpuStage::hop() {
  if (!hop_) {
    hop_ = device_->allocate(static_cast<uint64_t>(tokens_ * hp_.n_embd) * 4, MemoryKind::host,
                             fmt::format("hidden states between GPUs for {} tokens", tokens_));
  }
  return hop_;
}

void GpuStage::begin(GpuOps& ops, int64_t n, bool first_stage) {
  if (first_stage) return;
  ops.cmd.copy(hop(), 0, x, 0, static_cast<uint64_t>(n * hp_.n_embd) * 4);
}

void GpuStage::hand_over(GpuOps& ops, int64_t n) {
  ops.cmd.copy(x, 0, hop(), 0, static_cast<uint64_t>(n * hp_.n_embd) * 4);
}

void GpuStage::pass_to(GpuStage& next, int64_t n) {
  std::memcpy(next.hop().mapped(), hop().mapped(), static_cast<size_t>(n * hp_.n_embd) * 4);
}

void GpuStage::release_retired() {
  normed_in.release_retired();
  attention->release_retired();
  ffn->release_retired();
}

namespace {

bool embeddings_uploaded(const ModelEnds& e, size_t n_stages) {
  return e.embeddings_on_device || (e.tied() && n_stages == 1);
}

}  // namespace

uint64_t ModelEnds::upload_bytes(const ModelHParams& hp, size_t index, size_t n_stages) const {
  const bool first = index == 0, last = index + 1 == n_stages;
  const bool embedded = first && embeddings_uploaded(*this, n_stages);
  uint64_t total = aligned_bytes(static_cast<uint64_t>(hp.n_rot / 2) * 4);  // RoPE frequencies
  if (embedded) total += vk::upload_bytes(token_embd);
  if (last) {
    total += vk::upload_bytes(output_norm, hp.n_embd);
    if (!(tied() && n_stages == 1)) total += vk::upload_bytes(output);
  }
  return total;
}

void upload_model_ends(const ModelEnds& ends, const ModelHParams& hp, GpuStage& stage, size_t index,
                       size_t n_stages, GpuModelEnds& out) {
  DeviceWeights& w = *stage.weights;
  if (index == 0 && embeddings_uploaded(ends, n_stages))
    out.token_embd = w.matrix(ends.token_embd, "token_embd.weight");
  if (index + 1 == n_stages) {
    out.output_norm = w.floats(ends.output_norm, hp.n_embd, "output_norm.weight");
    out.output =
        ends.tied() && n_stages == 1 ? out.token_embd : w.matrix(ends.output, "output.weight");
  }
  const std::vector<float> inv_freq = rope_frequencies(hp);
  stage.inv_freq =
      w.floats(inv_freq.data(), static_cast<int64_t>(inv_freq.size()), "rope frequencies");
}

HybridTimeline merged_timeline(const std::vector<std::unique_ptr<GpuStage>>& stages) {
  HybridTimeline out;
  for (const auto& s : stages) {
    const HybridTimeline& t = s->ffn->timeline();
    out.step_ms += t.step_ms;
    out.layers.insert(out.layers.end(), t.layers.begin(), t.layers.end());
  }
  return out;
}

std::vector<Model::DeviceMemory> stages_memory(
    const std::vector<std::unique_ptr<GpuStage>>& stages) {
  std::vector<Model::DeviceMemory> out;
  std::vector<const Device*> seen;
  for (const auto& s : stages) {
    const Device& d = s->device();
    if (std::find(seen.begin(), seen.end(), &d) != seen.end()) continue;
    seen.push_back(&d);
    out.push_back({d.label(), d.device_local_bytes(), d.memory_budget()});
  }
  return out;
}

int64_t stages_encodings(const std::vector<std::unique_ptr<GpuStage>>& stages) {
  int64_t total = 0;
  for (const auto& s : stages) total += s->cmd->encodings();
  return total;
}

}  // namespace strata::vk
