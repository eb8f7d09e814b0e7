#include "backend/vulkan/gpu_decoder.h"

#include <algorithm>
#include <cmath>

#include "backend/vulkan/gpu_gdn_ops.h"
#include "model/decoder.h"
#include "util/error.h"
#include "util/profiler.h"

namespace strata::vk {

// One stage's Gated DeltaNet buffers (sized for `tokens` tokens; grown on demand) and its part
// of each recurrent state.
struct GpuDecoder::GdnWork {
  explicit GdnWork(Device& device) : gdn_in(device, "gated delta net output") {}

  // One host state buffer's device copy (floats [state_first, state_first + state_floats)).
  struct State {
    Buffer buffer;
    bool host_newer = true;     // the host wrote it since the device last had it
    bool device_newer = false;  // forwards ran on it since the host last had it
    int64_t consumed = -1;      // the header when the device copy was last in step with it
  };

  int64_t tokens = 0;
  Buffer qkv, mixed, z, b, a, beta, g;
  Buffer o;
  Buffer runs;                            // host-visible: [recurrent layer][run] GpuGdnRun
  ActivationScratch gdn_in;               // rounded copies of the gated DeltaNet output
  std::vector<int64_t> recurrent_layers;  // the stage's Gated DeltaNet layers
  int64_t state_first = 0, state_floats = 0;
  std::map<const float*, State> states;

  void ensure(Device& device, const GatedDeltaNetParams& p, int64_t n) {
    if (n <= tokens) return;
    const int64_t cap = std::max(n, 2 * tokens);
    const int64_t conv_dim = p.conv_dim(), v_dim = p.n_v_heads * p.d_v;
    const auto f32 = [&](int64_t count, const char* what) {
      return device.allocate(static_cast<uint64_t>(std::max<int64_t>(count, 1)) * 4,
                             MemoryKind::device, fmt::format("{} for {} tokens", what, cap));
    };
    qkv = f32(cap * conv_dim, "gated delta net q/k/v");
    mixed = f32(cap * conv_dim, "gated delta net convolved q/k/v");
    z = f32(cap * v_dim, "gated delta net output gates");
    b = f32(cap * p.n_v_heads, "gated delta net beta inputs");
    a = f32(cap * p.n_v_heads, "gated delta net alpha inputs");
    beta = f32(cap * p.n_v_heads, "gated delta net beta");
    g = f32(cap * p.n_v_heads, "gated delta net decay");
    o = f32(cap * v_dim, "gated delta net output");
    runs = device.allocate(static_cast<uint64_t>(std::max<size_t>(recurrent_layers.size(), 1) *
                                                 static_cast<size_t>(cap) * sizeof(GpuGdnRun)),
                           MemoryKind::host, "gated delta net runs");
    tokens = cap;
  }
};

GpuDecoder::GpuDecoder(std::unique_ptr<DecoderModel> cpu,
                       std::vector<std::shared_ptr<Device>> devices, GpuPlacement placement)
    : Model(GgufFile::parse(cpu->file().name(), cpu->file().bytes()), cpu->hparams()),
      cpu_(std::move(cpu)),
      placement_plan_(std::move(placement)) {
  STRATA_CHECK(!devices.empty(), "GpuDecoder: no device");
  for (const auto& d : devices) device_labels_.push_back(d->label());
  const std::vector<bool> kv_layers = cpu_->kv_layers();
  for (int64_t il = 0; il < hparams_.n_layer && first_kv_layer_ < 0; ++il)
    if (kv_layers[static_cast<size_t>(il)]) first_kv_layer_ = il;
  upload_weights(devices);
  if (plan_.head_on_gpu) {
    head_ = std::make_unique<GpuOutputHead>(stages_.back()->device(), hparams_, ends_.output,
                                            ends_.output_norm);
  }
}

GpuDecoder::~GpuDecoder() = default;

std::vector<Model::LayerDevices> GpuDecoder::layer_devices() const {
  std::vector<LayerDevices> out = cpu_->layer_devices();
  const std::vector<int>& on = placement_plan_.layer_device;
  for (size_t il = 0; il < out.size(); ++il) {
    const int device = on.empty() ? 0 : on[il];
    if (device < 0) continue;  // the CPU runs this layer from RAM
    const std::string& label = device_labels_[static_cast<size_t>(device)];
    out[il].attention = label;
    if (out[il].experts.empty()) continue;
    const ExpertsOnDevice& experts =
        layer_experts(placement_plan_.experts, static_cast<int64_t>(il));
    const auto n_gpu =
        experts.empty() ? hparams_.n_expert : std::count(experts.begin(), experts.end(), true);
    out[il].experts = {{label, n_gpu}, {kCpuDeviceName, hparams_.n_expert - n_gpu}};
  }
  return out;
}

std::string GpuDecoder::output_head_device() const {
  return head_ ? stages_.back()->device().label() : std::string(kCpuDeviceName);
}

// ---- weights ----------------------------------------------------------------------------

uint64_t GpuDecoder::layers_upload_bytes(int64_t first, int64_t last) const {
  const ModelHParams& hp = hparams_;
  const GatedDeltaNetParams& p = cpu_->spec().gdn;
  uint64_t total = 0;
  for (int64_t il = first; il < last; ++il) {
    const LayerWeights& l = cpu_->layers()[static_cast<size_t>(il)];
    if (cpu_->spec().layers[static_cast<size_t>(il)].recurrent()) {
      for (const ops::WeightMatrix* w :
           {&l.gdn.qkv, &l.gdn.gate, &l.gdn.beta, &l.gdn.alpha, &l.gdn.out})
        total += upload_bytes(*w);
      total += upload_bytes(l.gdn.conv, p.conv_kernel * p.conv_dim()) +
               upload_bytes(l.gdn.dt_bias, p.n_v_heads) + upload_bytes(l.gdn.a_neg, p.n_v_heads) +
               upload_bytes(l.gdn.norm, p.d_v);
    } else {
      total += attention_upload_bytes(l.attn, hp);
    }
    total += upload_bytes(l.attn_norm, hp.n_embd) + upload_bytes(l.ffn_norm, hp.n_embd) +
             ffn_upload_bytes(l.dense, l.moe, hp, layer_experts(placement_plan_.experts, il));
  }
  return total;
}

GpuDecoder::Layer GpuDecoder::upload_layer(DeviceWeights& w, int64_t il, GdnWork* gdn) const {
  const ModelHParams& hp = hparams_;
  const GatedDeltaNetParams& p = cpu_->spec().gdn;
  const LayerSpec& spec = cpu_->spec().layers[static_cast<size_t>(il)];
  const LayerWeights& src = cpu_->layers()[static_cast<size_t>(il)];
  const auto name = [&](LayerTensor t) {
    return layer_tensor_name(t, il, spec.post_attention_norm);
  };
  Layer l;
  l.attn_norm = w.floats(src.attn_norm, hp.n_embd, name(LayerTensor::attn_norm));
  l.ffn_norm = w.floats(src.ffn_norm, hp.n_embd, name(LayerTensor::ffn_norm));
  if (spec.recurrent()) {
    const GatedDeltaNetWeights& g = src.gdn;
    l.gdn.qkv = w.matrix(g.qkv, name(LayerTensor::gdn_qkv));
    l.gdn.gate = w.matrix(g.gate, name(LayerTensor::gdn_gate));
    l.gdn.beta = w.matrix(g.beta, name(LayerTensor::gdn_beta));
    l.gdn.alpha = w.matrix(g.alpha, name(LayerTensor::gdn_alpha));
    l.gdn.out = w.matrix(g.out, name(LayerTensor::gdn_out));
    l.gdn.conv = w.floats(g.conv, p.conv_kernel * p.conv_dim(), name(LayerTensor::gdn_conv));
    l.gdn.dt_bias = w.floats(g.dt_bias, p.n_v_heads, name(LayerTensor::gdn_dt_bias));
    l.gdn.a_neg = w.floats(g.a_neg, p.n_v_heads, name(LayerTensor::gdn_a));
    l.gdn.norm = w.floats(g.norm, p.d_v, name(LayerTensor::gdn_norm));
    l.gdn.state_offset = src.state_offset;
    if (gdn->recurrent_layers.empty()) gdn->state_first = src.state_offset;
    gdn->state_floats =
        src.state_offset + p.conv_state_floats() + p.ssm_state_floats() - gdn->state_first;
    gdn->recurrent_layers.push_back(il);
  } else {
    l.attn = upload_attention(w, src.attn, hp, il, spec.attention.gated_q);
    l.attn.extras.window = spec.window;
  }
  l.ffn = upload_ffn(w, src.dense, src.moe, hp, il, layer_experts(placement_plan_.experts, il));
  return l;
}

void GpuDecoder::upload_weights(const std::vector<std::shared_ptr<Device>>& devices) {
  const ModelHParams& hp = hparams_;
  const DecoderModel& m = *cpu_;
  const ModelEnds ends{m.token_embd(), m.output(), m.output_norm()};
  plan_ = plan_stages(placement_plan_, hp.n_layer, m.output().data == m.token_embd().data);
  STRATA_CHECK(plan_.gpu_stages() > 0,
               "{}: the placement keeps every layer and the output head on the CPU; run it with "
               "--device none",
               m.file().name());
  const std::vector<bool> kv_layers = m.kv_layers();
  int64_t shared_ff = 0;
  for (const LayerSpec& l : m.spec().layers)
    shared_ff = std::max(shared_ff, l.moe_layout.n_ff_shexp);
  layers_.resize(static_cast<size_t>(hp.n_layer));
  for (const StageLayers& run : plan_.runs) {
    if (run.on_cpu()) continue;
    const size_t si = stages_.size();
    auto stage = std::make_unique<GpuStage>(devices.at(static_cast<size_t>(run.device)), hp, run,
                                            kv_layers, shared_ff);
    std::unique_ptr<GdnWork> gdn;
    for (int64_t il = run.first; il < run.last && !gdn; ++il) {
      if (m.spec().layers[static_cast<size_t>(il)].recurrent())
        gdn = std::make_unique<GdnWork>(stage->device());
    }
    const uint64_t total =
        ends.upload_bytes(hp, plan_, si) + layers_upload_bytes(run.first, run.last);
    stage->weights = std::make_unique<DeviceWeights>(stage->device(), total);
    upload_model_ends(ends, hp, plan_, *stage, si, ends_);
    for (int64_t il = run.first; il < run.last; ++il) {
      Layer& l = layers_[static_cast<size_t>(il)];
      l = upload_layer(*stage->weights, il, gdn.get());
      stage->ffn->expect_uploads(l.ffn);
    }
    stages_.push_back(std::move(stage));
    gdn_.push_back(std::move(gdn));
  }
  if (!plan_.runs.front().on_cpu()) {
    embeddings_ = std::make_unique<GpuEmbeddings>(stages_.front()->device(), m.token_embd(),
                                                  ends_.token_embd);
  }
}

void GpuDecoder::set_matmul_settings(const ops::MatmulSettings& settings) {
  cpu_->set_matmul_settings(settings);  // the CPU's layers
  head_workspace_.matmul = settings;
  for (auto& s : stages_) s->ffn->set_matmul_settings(settings);  // the experts in RAM
}

void GpuDecoder::kv_slots_copied(const void* storage, int64_t from, int64_t to, int64_t n) {
  for (auto& s : stages_) s->kv->copy_slots(storage, from, to, n);
}

// ---- recurrent states -------------------------------------------------------------------

std::vector<uint64_t> GpuDecoder::prepare_states(size_t si, const ForwardBatch& batch) {
  GdnWork& w = *gdn_[si];
  Device& device = stages_[si]->device();
  const uint64_t bytes = static_cast<uint64_t>(w.state_floats) * 4;
  std::vector<uint64_t> addresses;
  for (const SequenceRuns::Run& run : rows_.runs()) {
    float* host = batch.recurrent[static_cast<size_t>(run.sequence)];
    GdnWork::State& s = w.states[host];
    if (!s.buffer) {
      s.buffer = device.allocate(bytes, MemoryKind::device, "a sequence's recurrent state");
      s.host_newer = true;
    }
    // A header the device copy did not see means the host changed the buffer: it wins.
    if (s.host_newer || s.consumed != static_cast<int64_t>(host[0])) {
      device.upload(s.buffer, 0, host + w.state_first, bytes);
      s.host_newer = s.device_newer = false;
    }
    addresses.push_back(s.buffer.address());
  }
  return addresses;
}

void GpuDecoder::recurrent_state_read(float* state) {
  for (size_t si = 0; si < gdn_.size(); ++si) {
    if (!gdn_[si]) continue;
    GdnWork& w = *gdn_[si];
    auto it = w.states.find(state);
    if (it == w.states.end() || !it->second.device_newer) continue;
    // The header is the host's (kept current by forward).
    stages_[si]->device().download(it->second.buffer, 0, state + w.state_first,
                                   static_cast<uint64_t>(w.state_floats) * 4);
    it->second.device_newer = false;
    it->second.consumed = static_cast<int64_t>(state[0]);
  }
}

void GpuDecoder::recurrent_state_written(const float* state) {
  for (auto& w : gdn_) {
    if (!w) continue;
    auto it = w->states.find(state);
    if (it == w->states.end()) continue;  // uploaded when a forward first sees it
    it->second.host_newer = true;
    it->second.device_newer = false;
  }
}

void GpuDecoder::recurrent_state_released(const float* state) {
  for (auto& w : gdn_)
    if (w) w->states.erase(state);
}

uint64_t GpuDecoder::state_bytes() const {
  uint64_t total = 0;
  for (const auto& w : gdn_) {
    if (!w) continue;
    for (const auto& [key, s] : w->states) total += s.buffer.size();
  }
  return total;
}

void GpuDecoder::advance_states(const ForwardBatch& batch) {
  rows_.advance_states(batch.recurrent);
  for (const SequenceRuns::Run& run : rows_.runs()) {
    float* host = batch.recurrent[static_cast<size_t>(run.sequence)];
    for (auto& w : gdn_) {
      if (!w) continue;
      GdnWork::State& s = w->states[host];
      s.consumed = static_cast<int64_t>(host[0]);
      s.device_newer = true;
    }
  }
}

// ---- forward ----------------------------------------------------------------------------

// Each recurrent layer's runs on stage si: the same token rows, that layer's part of each state.
void GpuDecoder::write_runs(size_t si, const ForwardBatch& batch) {
  if (!gdn_[si]) return;
  GdnWork& w = *gdn_[si];
  const GatedDeltaNetParams& p = cpu_->spec().gdn;
  const std::vector<uint64_t> states = prepare_states(si, batch);
  const std::span<const SequenceRuns::Run> runs_of_batch = rows_.runs();
  const auto n_runs = static_cast<int64_t>(runs_of_batch.size());
  auto* runs = static_cast<GpuGdnRun*>(w.runs.mapped());
  for (size_t r = 0; r < w.recurrent_layers.size(); ++r) {
    const GdnLayer& l = layers_[static_cast<size_t>(w.recurrent_layers[r])].gdn;
    for (int64_t i = 0; i < n_runs; ++i) {
      const SequenceRuns::Run& run = runs_of_batch[static_cast<size_t>(i)];
      const uint64_t conv = states[static_cast<size_t>(i)] +
                            static_cast<uint64_t>(l.state_offset - w.state_first) * 4;
      runs[r * static_cast<size_t>(n_runs) + static_cast<size_t>(i)] = {
          static_cast<int32_t>(run.begin), static_cast<int32_t>(run.count), conv,
          conv + static_cast<uint64_t>(p.conv_state_floats()) * 4};
    }
  }
}

void GpuDecoder::record_stage(size_t si, int64_t n, bool first_run, bool last_run,
                              bool with_stats) {
  const ModelHParams& hp = hparams_;
  GpuStage& s = *stages_[si];
  const auto n_runs = static_cast<int64_t>(rows_.runs().size());
  const std::vector<DeviceKv::Layer>* kv_layers = nullptr;
  if (first_kv_layer_ >= 0) {
    kv_layers =
        &s.kv->ensure(placement_.key, placement_.type, placement_.n_slots, placement_.max_slots);
  }
  CommandList& cmd = *s.cmd;
  cmd.begin();
  GpuOps ops{s.device(), cmd};
  if (first_run) embeddings_->record(ops, rows_.tokens(), s.step.tokens(), s.x);
  s.begin(ops, n, first_run);
  const uint64_t x = s.x.address(), normed = s.normed.address(), delta = s.delta.address();
  size_t recurrent_index = 0;
  for (int64_t il = s.layers().first; il < s.layers().last; ++il) {
    const Layer& l = layers_[static_cast<size_t>(il)];
    ops.rms_norm(x, hp.n_embd, l.attn_norm, normed, hp.n_embd, n, hp.n_embd, hp.rms_eps);
    ActivationInput normed_in(ops, s.normed_in, normed, hp.n_embd, n, hp.n_embd);
    if (cpu_->spec().layers[static_cast<size_t>(il)].recurrent()) {
      GdnWork& w = *gdn_[si];
      const uint64_t layer_runs =
          w.runs.address() + recurrent_index++ * static_cast<uint64_t>(n_runs) * sizeof(GpuGdnRun);
      record_gdn(ops, s, w, l.gdn, n, layer_runs, n_runs, normed_in);
    } else {
      s.attention->record(ops, l.attn, normed_in, s.step, placement_,
                          (*kv_layers)[static_cast<size_t>(il)], s.inv_freq, delta, n);
    }
    ops.add(x, delta, n * hp.n_embd);
    ops.rms_norm(x, hp.n_embd, l.ffn_norm, normed, hp.n_embd, n, hp.n_embd, hp.rms_eps);
    ActivationInput ffn_input(ops, s.normed_in, normed, hp.n_embd, n, hp.n_embd);
    const GpuFfnWeights* next =
        il + 1 < s.layers().last ? &layers_[static_cast<size_t>(il + 1)].ffn : nullptr;
    s.ffn->record(ops, l.ffn, il, ffn_input, s.normed, delta, n, next);
    ops.add(x, delta, n * hp.n_embd);
  }
  s.end(ops, n, last_run ? head_.get() : nullptr, rows_.logit_rows(), with_stats);
}

void GpuDecoder::forward(const ForwardBatch& batch, std::span<const SequenceKv> kv, float* logits,
                         ThreadPool& pool, ForwardStats* stats) {
  STRATA_PROFILE("gpu: forward");
  // exports_hidden() is false: a NextN drafter never asks a GPU plan for hidden states.
  STRATA_CHECK(!batch.hidden, "GPU plans do not export hidden states");
  const ModelHParams& hp = hparams_;
  const bool recurrent = cpu_->recurrent_state_floats() > 0;
  rows_.build(batch, kv, hp.n_layer, recurrent, hp.arch);
  const int64_t n = rows_.size();
  const auto rows = static_cast<int64_t>(rows_.logit_rows().size());
  if (n == 0) return;
  check_token_ids(rows_.tokens(), hp.n_vocab);
  if (first_kv_layer_ >= 0)
    placement_.build(rows_.sequence(), rows_.position(), kv, first_kv_layer_);
  for (size_t si = 0; si < stages_.size(); ++si) {
    GpuStage& s = *stages_[si];
    s.ensure(n);
    if (gdn_[si]) gdn_[si]->ensure(s.device(), cpu_->spec().gdn, n);
    s.step.write(rows_.tokens(), rows_.position(), rows_.sequence(),
                 first_kv_layer_ >= 0 ? &placement_ : nullptr);
    write_runs(si, batch);
  }
  StageSteps steps;
  steps.embed_on_host = [&](float* x) { embed_tokens(cpu_->token_embd(), rows_.tokens(), x); };
  steps.record = [&](size_t si, bool first_run, bool last_run) {
    record_stage(si, n, first_run, last_run, stats != nullptr);
  };
  steps.cpu_layers = [&](const StageLayers& run, float* x) {
    cpu_->forward_layers(batch, kv, run.first, run.last, x, pool, stats);
  };
  std::vector<StageSpan> spans = run_stages(plan_, stages_, n, host_x_, hp.n_embd, pool, steps);
  for (auto& w : gdn_)
    if (w) w->gdn_in.release_retired();
  if (head_) {
    head_->release_retired();
    head_->read(logits, rows);
  } else {
    output_head(cpu_->output(), cpu_->output_norm(), hp.rms_eps, host_x_.data(), rows_.logit_rows(),
                logits, head_workspace_, pool);
  }
  timeline_ = merged_timeline(stages_, std::move(spans));
  if (recurrent) advance_states(batch);
  if (stats) {
    for (auto& s : stages_) s->ffn->add_stats(*stats, n, s->layers().first, s->layers().last);
  }
}

void GpuDecoder::record_gdn(GpuOps& ops, GpuStage& s, GdnWork& w, const GdnLayer& l, int64_t n,
                            uint64_t runs, int64_t n_runs, ActivationInput& normed) {
  const ModelHParams& hp = hparams_;
  const GatedDeltaNetParams& p = cpu_->spec().gdn;
  const int64_t conv_dim = p.conv_dim(), hk = p.n_k_heads, hv = p.n_v_heads;
  const int64_t v_dim = hv * p.d_v;
  const uint64_t k_off = static_cast<uint64_t>(hk * p.d_k) * 4,
                 v_off = static_cast<uint64_t>(2 * hk * p.d_k) * 4;
  const auto project = [&](const GpuMatrix& m, ActivationInput& in, uint64_t y, int64_t y_stride) {
    const RoundedRows x = in.for_weights(m.type);
    ops.matmul(m, x.address, x.stride, y, y_stride, n);
  };
  project(l.qkv, normed, w.qkv.address(), conv_dim);
  project(l.gate, normed, w.z.address(), v_dim);
  project(l.beta, normed, w.b.address(), hv);
  project(l.alpha, normed, w.a.address(), hv);
  GpuGdnOps gdn{s.device(), ops.cmd};
  gdn.conv_silu(w.qkv.address(), w.mixed.address(), conv_dim, l.conv, p.conv_kernel, conv_dim, runs,
                n_runs, n);
  gdn.l2norm_gates(w.mixed.address(), conv_dim, n, hk, p.d_k, p.rms_eps,
                   1.0f / std::sqrt(static_cast<float>(p.d_k)), w.b.address(), w.a.address(), hv,
                   l.a_neg, l.dt_bias, hv, w.beta.address(), w.g.address());
  gdn.delta_rule(w.mixed.address(), w.mixed.address() + k_off, conv_dim, w.mixed.address() + v_off,
                 conv_dim, w.beta.address(), w.g.address(), hv, w.o.address(), v_dim, runs, n_runs,
                 hk, hv, p.d_k, p.d_v, p.k_head_modulo);
  gdn.gated_norm(w.o.address(), v_dim, l.norm, w.z.address(), v_dim, n, hv, p.d_v, p.rms_eps);
  ActivationInput o(ops, w.gdn_in, w.o.address(), v_dim, n, v_dim);
  project(l.out, o, s.delta.address(), hp.n_embd);
}

}  // namespace strata::vk
