#include "backend/vulkan/gpu_standard_decoder.h"

#include <algorithm>

#include "model/decoder.h"
#include "util/error.h"
#include "util/profiler.h"

namespace strata::vk {
GpuStandardDecoder::GpuStandardDecoder(std::unique_ptr<StandardDecoder> cpu,
                                       std::shared_ptr<Device> device, GpuPlacement placement)
    : Model(GgufFile::parse(cpu->file().name(), cpu->file().bytes()), cpu->hparams()),
      cpu_(std::move(cpu)),
      device_(std::move(device)),
      placement_plan_(std::move(placement)),
      step_(*device_),
      normed_in_(*device_, "normed states") {
  upload_weights();
  kv_ = std::make_unique<DeviceKv>(*device_, hparams_.n_head_kv, hparams_.head_dim,
                                   std::vector<bool>(static_cast<size_t>(hparams_.n_layer), true));
  cmd_ = std::make_unique<CommandList>(*device_);
  cmd_->mark_model_step();
  attention_ = std::make_unique<GpuAttention>(*device_, hparams_);
  const int64_t shared_ff = layers_.empty() || !layers_[0].ffn.shared_gate_w.address
                                ? 0
                                : layers_[0].ffn.shared_gate_w.rows;
  ffn_ = std::make_unique<GpuFfn>(*device_, hparams_, shared_ff);
  head_ = std::make_unique<GpuOutputHead>(*device_, hparams_, output_, output_norm_);
}

GpuStandardDecoder::~GpuStandardDecoder() = default;

void GpuStandardDecoder::upload_weights() {
  const ModelHParams& hp = hparams_;
  const StandardDecoder& m = *cpu_;
  const bool tied = m.output().data == m.token_embd().data;
  const bool embd_on_device = placement_plan_.embeddings_on_device || tied;
  uint64_t total = (embd_on_device ? upload_bytes(m.token_embd()) : 0) +
                   upload_bytes(m.output_norm(), hp.n_embd) +
                   (tied ? 0 : upload_bytes(m.output())) +
                   aligned_bytes(static_cast<uint64_t>(hp.n_rot / 2) * 4);  // RoPE frequencies
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const StandardDecoder::Layer& l = m.layers()[static_cast<size_t>(il)];
    total += attention_upload_bytes(l.attn, hp) +
             ffn_upload_bytes(l.dense, l.moe, hp, layer_experts(placement_plan_.experts, il)) +
             upload_bytes(l.attn_norm, hp.n_embd) + upload_bytes(l.ffn_norm, hp.n_embd);
  }
  weights_ = std::make_unique<DeviceWeights>(*device_, total);
  DeviceWeights& w = *weights_;
  if (embd_on_device) token_embd_ = w.matrix(m.token_embd(), "token_embd.weight");
  embeddings_ = std::make_unique<GpuEmbeddings>(*device_, m.token_embd(), token_embd_);
  output_norm_ = w.floats(m.output_norm(), hp.n_embd, "output_norm.weight");
  output_ = tied ? token_embd_ : w.matrix(m.output(), "output.weight");
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const StandardDecoder::Layer& src = m.layers()[static_cast<size_t>(il)];
    Layer l;
    l.attn_norm = w.floats(src.attn_norm, hp.n_embd, layer_tensor(il, "attn_norm"));
    l.ffn_norm = w.floats(src.ffn_norm, hp.n_embd, layer_tensor(il, "ffn_norm"));
    l.attn = upload_attention(w, src.attn, hp, il, /*gated_q=*/false);
    l.ffn = upload_ffn(w, src.dense, src.moe, hp, il, layer_experts(placement_plan_.experts, il));
    layers_.push_back(l);
  }
  const std::vector<float> inv_freq = rope_frequencies(hp);
  inv_freq_ = w.floats(inv_freq.data(), static_cast<int64_t>(inv_freq.size()), "rope frequencies");
}

void GpuStandardDecoder::ensure_work(int64_t n) {
  attention_->ensure(n);
  ffn_->begin_step(n);
  if (n <= tokens_) return;
  const int64_t cap = std::max(n, 2 * tokens_);
  const auto f32 = [&](int64_t count, const char* what) {
    return device_->allocate(static_cast<uint64_t>(count) * 4, MemoryKind::device,
                             fmt::format("{} for {} tokens", what, cap));
  };
  x_ = f32(cap * hparams_.n_embd, "hidden states");
  normed_ = f32(cap * hparams_.n_embd, "normed states");
  delta_ = f32(cap * hparams_.n_embd, "layer output");
  tokens_ = cap;
}

void GpuStandardDecoder::kv_slots_copied(const void* storage, int64_t from, int64_t to, int64_t n) {
  kv_->copy_slots(storage, from, to, n);
}

void GpuStandardDecoder::forward(const ForwardBatch& batch, std::span<const SequenceKv> kv,
                                 float* logits, ThreadPool& pool, ForwardStats* stats) {
  STRATA_PROFILE("gpu: forward");
  const ModelHParams& hp = hparams_;
  layout_.build(batch, kv, hp.n_layer);
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  const int64_t rows = static_cast<int64_t>(layout_.logit_rows.size());
  if (n == 0) return;
  check_token_ids(batch.tokens, hp.n_vocab);
  ensure_work(n);
  placement_.build(layout_.sequence, layout_.position, kv, 0);
  const auto& kv_layers =
      kv_->ensure(placement_.key, placement_.type, placement_.n_slots, placement_.max_slots);
  step_.write(batch.tokens, layout_.position, layout_.sequence, &placement_);

  CommandList& cmd = *cmd_;
  cmd.begin();
  GpuOps ops{*device_, cmd};
  embeddings_->record(ops, batch.tokens, step_.tokens(), x_);
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const Layer& l = layers_[static_cast<size_t>(il)];
    ops.rms_norm(x_.address(), hp.n_embd, l.attn_norm, normed_.address(), hp.n_embd, n, hp.n_embd,
                 hp.rms_eps);
    ActivationInput normed(ops, normed_in_, normed_.address(), hp.n_embd, n, hp.n_embd);
    attention_->record(ops, l.attn, normed, step_, placement_, kv_layers[static_cast<size_t>(il)],
                       inv_freq_, delta_.address(), n);
    ops.add(x_.address(), delta_.address(), n * hp.n_embd);
    ops.rms_norm(x_.address(), hp.n_embd, l.ffn_norm, normed_.address(), hp.n_embd, n, hp.n_embd,
                 hp.rms_eps);
    ActivationInput ffn_input(ops, normed_in_, normed_.address(), hp.n_embd, n, hp.n_embd);
    ffn_->record(ops, l.ffn, il, ffn_input, normed_, delta_.address(), n);
    ops.add(x_.address(), delta_.address(), n * hp.n_embd);
  }
  head_->record(ops, x_, layout_.logit_rows);
  if (stats) ffn_->record_stats(ops, n);
  cmd.end();
  ffn_->run_step(cmd, pool);
  normed_in_.release_retired();
  attention_->release_retired();
  ffn_->release_retired();
  head_->release_retired();
  head_->read(logits, rows);
  if (stats) ffn_->add_stats(*stats, n);
}

}  // namespace strata::vk
