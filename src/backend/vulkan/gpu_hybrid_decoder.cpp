#include "backend/vulkan/gpu_hybrid_decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/vulkan/gpu_gdn_ops.h"
#include "model/decoder.h"
#include "util/error.h"
#include "util/profiler.h"

namespace strata::vk {
// Device buffers of one step, sized for `tokens` tokens; grown on demand.
struct GpuHybridDecoder::Work {
  int64_t tokens = 0;
  Buffer x, normed, delta;              // [n][n_embd]
  Buffer qkv, mixed, z, b, a, beta, g;  // Gated DeltaNet
  Buffer o;
  Buffer runs;  // host-visible: [recurrent layer][run] GpuGdnRun
  std::unique_ptr<CommandList> cmd;
};

GpuHybridDecoder::GpuHybridDecoder(std::unique_ptr<HybridDecoder> cpu,
                                   std::shared_ptr<Device> device, GpuPlacement placement)
    : Model(GgufFile::parse(cpu->file().name(), cpu->file().bytes()), cpu->hparams()),
      cpu_(std::move(cpu)),
      device_(std::move(device)),
      placement_plan_(std::move(placement)),
      step_(*device_),
      normed_in_(*device_, "normed states"),
      gdn_in_(*device_, "gated delta net output") {
  const std::vector<bool> kv_layers = cpu_->kv_layers();
  for (int64_t il = 0; il < hparams_.n_layer; ++il) {
    if (!kv_layers[static_cast<size_t>(il)]) {
      recurrent_layers_.push_back(il);
    } else if (first_kv_layer_ < 0) {
      first_kv_layer_ = il;
    }
  }
  upload_weights();
  kv_ = std::make_unique<DeviceKv>(*device_, hparams_.n_head_kv, hparams_.head_dim, kv_layers);
  attention_ = std::make_unique<GpuAttention>(*device_, hparams_);
  ffn_ = std::make_unique<GpuFfn>(*device_, hparams_, cpu_->options().n_ff_shexp);
  head_ = std::make_unique<GpuOutputHead>(*device_, hparams_, output_, output_norm_);
  work_ = std::make_unique<Work>();
  work_->cmd = std::make_unique<CommandList>(*device_);
  work_->cmd->mark_model_step();
}

GpuHybridDecoder::~GpuHybridDecoder() = default;

void GpuHybridDecoder::upload_weights() {
  const ModelHParams& hp = hparams_;
  const HybridDecoder& m = *cpu_;
  const GatedDeltaNetParams& p = m.options().gdn;
  const bool tied = m.output().data == m.token_embd().data;
  const bool embd_on_device = placement_plan_.embeddings_on_device || tied;
  uint64_t total = (embd_on_device ? upload_bytes(m.token_embd()) : 0) +
                   upload_bytes(m.output_norm(), hp.n_embd) +
                   (tied ? 0 : upload_bytes(m.output())) +
                   aligned_bytes(static_cast<uint64_t>(hp.n_rot / 2) * 4);  // RoPE frequencies
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const HybridDecoder::Layer& l = m.layers()[static_cast<size_t>(il)];
    for (const ops::WeightMatrix* w :
         {&l.gdn.qkv, &l.gdn.gate, &l.gdn.beta, &l.gdn.alpha, &l.gdn.out})
      total += upload_bytes(*w);
    if (l.attn.wq.data) total += attention_upload_bytes(l.attn, hp);
    total += upload_bytes(l.attn_norm, hp.n_embd) + upload_bytes(l.post_norm, hp.n_embd) +
             upload_bytes(l.gdn.conv, p.conv_kernel * p.conv_dim()) +
             upload_bytes(l.gdn.dt_bias, p.n_v_heads) + upload_bytes(l.gdn.a_neg, p.n_v_heads) +
             upload_bytes(l.gdn.norm, p.d_v) +
             ffn_upload_bytes({}, l.moe, hp, layer_experts(placement_plan_.experts, il));
  }
  weights_ = std::make_unique<DeviceWeights>(*device_, total);
  DeviceWeights& w = *weights_;
  if (embd_on_device) token_embd_ = w.matrix(m.token_embd(), "token_embd.weight");
  embeddings_ = std::make_unique<GpuEmbeddings>(*device_, m.token_embd(), token_embd_);
  output_norm_ = w.floats(m.output_norm(), hp.n_embd, "output_norm.weight");
  output_ = tied ? token_embd_ : w.matrix(m.output(), "output.weight");
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const HybridDecoder::Layer& src = m.layers()[static_cast<size_t>(il)];
    const auto name = [&](const char* t) { return layer_tensor(il, t); };
    Layer l;
    l.attn_norm = w.floats(src.attn_norm, hp.n_embd, name("attn_norm"));
    l.post_norm = w.floats(src.post_norm, hp.n_embd, name("post_attention_norm"));
    if (src.attn.wq.data) {
      l.attn = upload_attention(w, src.attn, hp, il, /*gated_q=*/true);
    } else {
      const GatedDeltaNetWeights& g = src.gdn;
      l.qkv = w.matrix(g.qkv, name("attn_qkv"));
      l.gate = w.matrix(g.gate, name("attn_gate"));
      l.beta = w.matrix(g.beta, name("ssm_beta"));
      l.alpha = w.matrix(g.alpha, name("ssm_alpha"));
      l.out = w.matrix(g.out, name("ssm_out"));
      l.conv = w.floats(g.conv, p.conv_kernel * p.conv_dim(), name("ssm_conv1d"));
      l.dt_bias = w.floats(g.dt_bias, p.n_v_heads, name("ssm_dt.bias"));
      l.a_neg = w.floats(g.a_neg, p.n_v_heads, name("ssm_a"));
      l.ssm_norm = w.floats(g.norm, p.d_v, name("ssm_norm"));
      l.state_offset = src.state_offset;
    }
    l.ffn = upload_ffn(w, {}, src.moe, hp, il, layer_experts(placement_plan_.experts, il));
    layers_.push_back(l);
  }
  const std::vector<float> inv_freq = rope_frequencies(hp);
  inv_freq_ = w.floats(inv_freq.data(), static_cast<int64_t>(inv_freq.size()), "rope frequencies");
}

void GpuHybridDecoder::ensure_work(int64_t n) {
  Work& w = *work_;
  attention_->ensure(n);
  ffn_->begin_step(n);
  if (n <= w.tokens) return;
  const ModelHParams& hp = hparams_;
  const GatedDeltaNetParams& p = cpu_->options().gdn;
  const int64_t cap = std::max(n, 2 * w.tokens);
  const int64_t conv_dim = p.conv_dim(), v_dim = p.n_v_heads * p.d_v;
  const auto f32 = [&](int64_t count, const char* what) {
    return device_->allocate(static_cast<uint64_t>(std::max<int64_t>(count, 1)) * 4,
                             MemoryKind::device, fmt::format("{} for {} tokens", what, cap));
  };
  w.x = f32(cap * hp.n_embd, "hidden states");
  w.normed = f32(cap * hp.n_embd, "normed states");
  w.delta = f32(cap * hp.n_embd, "layer output");
  w.qkv = f32(cap * conv_dim, "gated delta net q/k/v");
  w.mixed = f32(cap * conv_dim, "gated delta net convolved q/k/v");
  w.z = f32(cap * v_dim, "gated delta net output gates");
  w.b = f32(cap * p.n_v_heads, "gated delta net beta inputs");
  w.a = f32(cap * p.n_v_heads, "gated delta net alpha inputs");
  w.beta = f32(cap * p.n_v_heads, "gated delta net beta");
  w.g = f32(cap * p.n_v_heads, "gated delta net decay");
  w.o = f32(cap * v_dim, "gated delta net output");
  w.runs = device_->allocate(static_cast<uint64_t>(std::max<size_t>(recurrent_layers_.size(), 1) *
                                                   static_cast<size_t>(cap) * sizeof(GpuGdnRun)),
                             MemoryKind::host, "gated delta net runs");
  w.tokens = cap;
}

void GpuHybridDecoder::kv_slots_copied(const void* storage, int64_t from, int64_t to, int64_t n) {
  kv_->copy_slots(storage, from, to, n);
}

// ---- recurrent states -------------------------------------------------------------------

std::vector<uint64_t> GpuHybridDecoder::prepare_states(const ForwardBatch& batch) {
  const uint64_t bytes = static_cast<uint64_t>(recurrent_state_floats()) * 4;
  std::vector<uint64_t> addresses;
  for (const SequenceRuns::Run& run : ordered_.runs) {
    float* host = batch.recurrent[static_cast<size_t>(run.sequence)];
    State& s = states_[host];
    if (!s.buffer) {
      s.buffer = device_->allocate(bytes, MemoryKind::device, "a sequence's recurrent state");
      s.host_newer = true;
    }
    // A header the device copy did not see means the host changed the buffer: it wins.
    if (s.host_newer || s.consumed != static_cast<int64_t>(host[0])) {
      device_->upload(s.buffer, 0, host, bytes);
      s.host_newer = s.device_newer = false;
    }
    addresses.push_back(s.buffer.address());
  }
  return addresses;
}

void GpuHybridDecoder::recurrent_state_read(float* state) {
  auto it = states_.find(state);
  if (it == states_.end() || !it->second.device_newer) return;
  // The header is the host's (kept current by forward).
  const int64_t header = HybridDecoder::kHeader;
  device_->download(it->second.buffer, static_cast<uint64_t>(header) * 4, state + header,
                    static_cast<uint64_t>(recurrent_state_floats() - header) * 4);
  it->second.device_newer = false;
  it->second.consumed = static_cast<int64_t>(state[0]);
}

void GpuHybridDecoder::recurrent_state_written(const float* state) {
  auto it = states_.find(state);
  if (it == states_.end()) return;  // uploaded when a forward first sees it
  it->second.host_newer = true;
  it->second.device_newer = false;
}

void GpuHybridDecoder::recurrent_state_released(const float* state) {
  states_.erase(state);
}

int64_t GpuHybridDecoder::step_encodings() const {
  return work_->cmd->encodings();
}

uint64_t GpuHybridDecoder::state_bytes() const {
  uint64_t total = 0;
  for (const auto& [key, s] : states_) total += s.buffer.size();
  return total;
}

// ---- forward ----------------------------------------------------------------------------

void GpuHybridDecoder::forward(const ForwardBatch& batch, std::span<const SequenceKv> kv,
                               float* logits, ThreadPool& pool, ForwardStats* stats) {
  STRATA_PROFILE("gpu: forward");
  const ModelHParams& hp = hparams_;
  const GatedDeltaNetParams& p = cpu_->options().gdn;
  layout_.build(batch, kv, hp.n_layer);
  ordered_.build(batch, layout_, batch.recurrent, kv.size(), hp.arch);
  const int64_t n = static_cast<int64_t>(ordered_.tokens.size());
  const int64_t rows = static_cast<int64_t>(ordered_.logit_rows.size());
  if (n == 0) return;
  check_token_ids(ordered_.tokens, hp.n_vocab);
  const int64_t n_runs = static_cast<int64_t>(ordered_.runs.size());
  ensure_work(n);
  Work& w = *work_;

  // Keys and values of the full-attention layers.
  const std::vector<DeviceKv::Layer>* kv_layers = nullptr;
  if (first_kv_layer_ >= 0) {
    placement_.build(ordered_.sequence, ordered_.position, kv, first_kv_layer_);
    kv_layers =
        &kv_->ensure(placement_.key, placement_.type, placement_.n_slots, placement_.max_slots);
  }
  step_.write(ordered_.tokens, ordered_.position, ordered_.sequence,
              first_kv_layer_ >= 0 ? &placement_ : nullptr);
  // Each recurrent layer's runs: the same token rows, that layer's part of each state.
  const std::vector<uint64_t> states = prepare_states(batch);
  auto* runs = static_cast<GpuGdnRun*>(w.runs.mapped());
  for (size_t r = 0; r < recurrent_layers_.size(); ++r) {
    const Layer& l = layers_[static_cast<size_t>(recurrent_layers_[r])];
    for (int64_t i = 0; i < n_runs; ++i) {
      const SequenceRuns::Run& run = ordered_.runs[static_cast<size_t>(i)];
      const uint64_t conv =
          states[static_cast<size_t>(i)] + static_cast<uint64_t>(l.state_offset) * 4;
      runs[r * static_cast<size_t>(n_runs) + static_cast<size_t>(i)] = {
          static_cast<int32_t>(run.begin), static_cast<int32_t>(run.count), conv,
          conv + static_cast<uint64_t>(p.conv_state_floats()) * 4};
    }
  }

  CommandList& cmd = *w.cmd;
  cmd.begin();
  GpuOps ops{*device_, cmd};
  embeddings_->record(ops, ordered_.tokens, step_.tokens(), w.x);
  size_t recurrent_index = 0;
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const Layer& l = layers_[static_cast<size_t>(il)];
    ops.rms_norm(w.x.address(), hp.n_embd, l.attn_norm, w.normed.address(), hp.n_embd, n, hp.n_embd,
                 hp.rms_eps);
    ActivationInput normed(ops, normed_in_, w.normed.address(), hp.n_embd, n, hp.n_embd);
    if (l.qkv.address) {
      const uint64_t layer_runs =
          w.runs.address() + recurrent_index++ * static_cast<uint64_t>(n_runs) * sizeof(GpuGdnRun);
      record_gdn(ops, l, n, layer_runs, n_runs, normed);
    } else {
      attention_->record(ops, l.attn, normed, step_, placement_,
                         (*kv_layers)[static_cast<size_t>(il)], inv_freq_, w.delta.address(), n);
    }
    ops.add(w.x.address(), w.delta.address(), n * hp.n_embd);
    ops.rms_norm(w.x.address(), hp.n_embd, l.post_norm, w.normed.address(), hp.n_embd, n, hp.n_embd,
                 hp.rms_eps);
    ActivationInput post(ops, normed_in_, w.normed.address(), hp.n_embd, n, hp.n_embd);
    ffn_->record(ops, l.ffn, il, post, w.normed, w.delta.address(), n);
    ops.add(w.x.address(), w.delta.address(), n * hp.n_embd);
  }
  head_->record(ops, w.x, ordered_.logit_rows);
  if (stats) ffn_->record_stats(ops, n);
  cmd.end();
  ffn_->run_step(cmd, pool);
  for (ActivationScratch* s : {&normed_in_, &gdn_in_}) s->release_retired();
  attention_->release_retired();
  ffn_->release_retired();
  head_->release_retired();
  head_->read(logits, rows);

  // The states advanced: the device holds them, the host header counts the tokens.
  for (const SequenceRuns::Run& run : ordered_.runs) {
    float* host = batch.recurrent[static_cast<size_t>(run.sequence)];
    host[0] = static_cast<float>(static_cast<int64_t>(host[0]) + run.count);
    State& s = states_[host];
    s.consumed = static_cast<int64_t>(host[0]);
    s.device_newer = true;
  }
  if (stats) ffn_->add_stats(*stats, n);
}

void GpuHybridDecoder::record_gdn(GpuOps& ops, const Layer& l, int64_t n, uint64_t runs,
                                  int64_t n_runs, ActivationInput& normed) {
  const ModelHParams& hp = hparams_;
  const GatedDeltaNetParams& p = cpu_->options().gdn;
  Work& w = *work_;
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
  GpuGdnOps gdn{*device_, ops.cmd};
  gdn.conv_silu(w.qkv.address(), w.mixed.address(), conv_dim, l.conv, p.conv_kernel, conv_dim, runs,
                n_runs, n);
  gdn.l2norm_gates(w.mixed.address(), conv_dim, n, hk, p.d_k, p.rms_eps,
                   1.0f / std::sqrt(static_cast<float>(p.d_k)), w.b.address(), w.a.address(), hv,
                   l.a_neg, l.dt_bias, hv, w.beta.address(), w.g.address());
  gdn.delta_rule(w.mixed.address(), w.mixed.address() + k_off, conv_dim, w.mixed.address() + v_off,
                 conv_dim, w.beta.address(), w.g.address(), hv, w.o.address(), v_dim, runs, n_runs,
                 hk, hv, p.d_k, p.d_v, p.k_head_modulo);
  gdn.gated_norm(w.o.address(), v_dim, l.ssm_norm, w.z.address(), v_dim, n, hv, p.d_v, p.rms_eps);
  ActivationInput o(ops, gdn_in_, w.o.address(), v_dim, n, v_dim);
  project(l.out, o, w.delta.address(), hp.n_embd);
}

}  // namespace strata::vk
