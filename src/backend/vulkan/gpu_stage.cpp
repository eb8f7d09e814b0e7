#include "backend/vulkan/gpu_stage.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "backend/vulkan/device_weights.h"
#include "model/layer_spec.h"

namespace strata::vk {

namespace {

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

}  // namespace

size_t StagePlan::gpu_stages() const {
  return static_cast<size_t>(
      std::count_if(runs.begin(), runs.end(), [](const StageLayers& r) { return !r.on_cpu(); }));
}

StagePlan plan_stages(const GpuPlacement& placement, int64_t n_layer, bool tied) {
  StagePlan p;
  p.runs = stage_layers(placement.layer_device, n_layer);
  p.head_on_gpu = !p.runs.back().on_cpu() && placement.head_on_device;
  const bool one_stage = p.runs.size() == 1;
  // A tied head on the only stage reads the embeddings' upload, so they go up with it.
  p.embeddings_on_gpu = !p.runs.front().on_cpu() &&
                        (placement.embeddings_on_device || (tied && one_stage && p.head_on_gpu));
  p.shared_table = tied && one_stage && p.embeddings_on_gpu && p.head_on_gpu;
  return p;
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

void GpuStage::end(GpuOps& ops, int64_t n, GpuOutputHead* head, std::span<const int32_t> rows,
                   bool with_stats) {
  if (head) {
    head->record(ops, x, rows);
  } else {
    hand_over(ops, n);
  }
  if (with_stats) ffn->record_stats(ops, n);
  ops.cmd.end();
}

void GpuStage::receive(const float* x, int64_t n) {
  std::memcpy(hop().mapped(), x, static_cast<size_t>(n * hp_.n_embd) * 4);
}

void GpuStage::send(float* x, int64_t n) {
  std::memcpy(x, hop().mapped(), static_cast<size_t>(n * hp_.n_embd) * 4);
}

void GpuStage::release_retired() {
  normed_in.release_retired();
  attention->release_retired();
  ffn->release_retired();
}

uint64_t ModelEnds::upload_bytes(const ModelHParams& hp, const StagePlan& plan,
                                 size_t stage) const {
  // RoPE frequencies and the cos/sin scale
  uint64_t total = aligned_bytes(static_cast<uint64_t>(hp.n_rot / 2 + 1) * 4);
  if (stage == 0 && plan.embeddings_on_gpu) total += vk::upload_bytes(token_embd);
  if (plan.head_on_gpu && stage + 1 == plan.gpu_stages()) {
    total += vk::upload_bytes(output_norm, hp.n_embd);
    if (!plan.shared_table) total += vk::upload_bytes(output);
  }
  return total;
}

void upload_model_ends(const ModelEnds& ends, const ModelHParams& hp, const StagePlan& plan,
                       GpuStage& stage, size_t index, GpuModelEnds& out) {
  DeviceWeights& w = *stage.weights;
  if (index == 0 && plan.embeddings_on_gpu)
    out.token_embd = w.matrix(ends.token_embd, kTokenEmbdTensor);
  if (plan.head_on_gpu && index + 1 == plan.gpu_stages()) {
    out.output_norm = w.floats(ends.output_norm, hp.n_embd, kOutputNormTensor);
    out.output = plan.shared_table ? out.token_embd : w.matrix(ends.output, kOutputTensor);
  }
  const std::vector<float> inv_freq = rope_frequencies(hp);
  stage.inv_freq =
      w.floats(inv_freq.data(), static_cast<int64_t>(inv_freq.size()), "rope frequencies");
}

std::vector<StageSpan> run_stages(const StagePlan& plan,
                                  const std::vector<std::unique_ptr<GpuStage>>& stages, int64_t n,
                                  std::vector<float>& host_x, int64_t n_embd, ThreadPool& pool,
                                  const StageSteps& steps) {
  using clock = std::chrono::steady_clock;
  std::vector<StageSpan> spans;
  const auto timed = [&](const StageLayers& into, bool cpu, const auto& work) {
    const auto t0 = clock::now();
    work();
    spans.push_back({into.first, into.last, cpu,
                     std::chrono::duration<double, std::milli>(clock::now() - t0).count()});
  };
  if (plan.gpu_stages() < plan.runs.size() || !plan.head_on_gpu)
    host_x.resize(static_cast<size_t>(n * n_embd));
  size_t gi = 0;  // the next GPU stage
  for (size_t r = 0; r < plan.runs.size(); ++r) {
    const StageLayers& run = plan.runs[r];
    const bool first = r == 0, last = r + 1 == plan.runs.size();
    if (run.on_cpu()) {
      timed(run, true, [&] {
        if (first) steps.embed_on_host(host_x.data());
        steps.cpu_layers(run, host_x.data());
      });
      continue;
    }
    GpuStage& s = *stages[gi];
    if (!first && plan.runs[r - 1].on_cpu())
      timed(run, false, [&] { s.receive(host_x.data(), n); });
    steps.record(gi, first, last);
    s.ffn->run_step(*s.cmd, pool);
    s.release_retired();
    ++gi;
    if (last && plan.head_on_gpu) continue;
    if (!last && !plan.runs[r + 1].on_cpu()) {
      timed(plan.runs[r + 1], false,
            [&] { stages[gi]->receive(static_cast<const float*>(s.hop().mapped()), n); });
    } else {
      s.send(host_x.data(), n);  // part of the CPU run or head that follows
    }
  }
  return spans;
}

HybridTimeline merged_timeline(const std::vector<std::unique_ptr<GpuStage>>& stages,
                               std::vector<StageSpan> spans) {
  HybridTimeline out;
  out.stages = std::move(spans);
  for (const StageSpan& s : out.stages) out.step_ms += s.ms;
  for (size_t si = 0; si < stages.size(); ++si) {
    const HybridTimeline& t = stages[si]->ffn->timeline();
    for (GpuSegmentSpan g : t.segments) {
      g.stage = static_cast<int>(si);
      out.segments.push_back(g);
    }
    out.step_ms += t.step_ms;
    out.layers.insert(out.layers.end(), t.layers.begin(), t.layers.end());
    out.uploads.insert(out.uploads.end(), t.uploads.begin(), t.uploads.end());
  }
  return out;
}

std::vector<Model::DeviceMemory> stages_memory(
    const std::vector<std::unique_ptr<GpuStage>>& stages) {
  std::vector<Model::DeviceMemory> out;
  std::vector<const Device*> seen;
  for (const auto& s : stages) {
    const Device& d = s->device();
    const uint64_t pinned = s->weights ? s->weights->pinned_bytes() : 0;
    if (const auto it = std::find(seen.begin(), seen.end(), &d); it != seen.end()) {
      out[static_cast<size_t>(it - seen.begin())].pinned_bytes += pinned;
      continue;
    }
    seen.push_back(&d);
    out.push_back({d.label(), d.device_local_bytes(), d.memory_budget(), pinned});
  }
  return out;
}

int64_t stages_encodings(const std::vector<std::unique_ptr<GpuStage>>& stages) {
  int64_t total = 0;
  for (const auto& s : stages) total += s->cmd->encodings();
  return total;
}

}  // namespace strata::vk
