#include "backend/vulkan/gpu_standard_decoder.h"

#include <algorithm>

#include "model/decoder.h"
#include "util/error.h"
#include "util/profiler.h"

namespace strata::vk {
GpuStandardDecoder::GpuStandardDecoder(std::unique_ptr<StandardDecoder> cpu,
                                       std::vector<std::shared_ptr<Device>> devices,
                                       GpuPlacement placement)
    : Model(GgufFile::parse(cpu->file().name(), cpu->file().bytes()), cpu->hparams()),
      cpu_(std::move(cpu)),
      placement_plan_(std::move(placement)) {
  STRATA_CHECK(!devices.empty(), "GpuStandardDecoder: no device");
  upload_weights(devices);
  if (plan_.head_on_gpu) {
    head_ = std::make_unique<GpuOutputHead>(stages_.back()->device(), hparams_, ends_.output,
                                            ends_.output_norm);
  }
}

GpuStandardDecoder::~GpuStandardDecoder() = default;

void GpuStandardDecoder::upload_weights(const std::vector<std::shared_ptr<Device>>& devices) {
  const ModelHParams& hp = hparams_;
  const StandardDecoder& m = *cpu_;
  const ModelEnds ends{m.token_embd(), m.output(), m.output_norm()};
  plan_ = plan_stages(placement_plan_, hp.n_layer, m.output().data == m.token_embd().data);
  STRATA_CHECK(plan_.gpu_stages() > 0,
               "{}: the placement keeps every layer and the output head on the CPU; run it with "
               "--device none",
               m.file().name());
  const ops::WeightMatrix& shared_gate =
      m.layers().empty() ? ops::WeightMatrix{} : m.layers()[0].moe.shared.gate;
  const int64_t shared_ff = shared_gate.data ? shared_gate.rows : 0;
  layers_.resize(static_cast<size_t>(hp.n_layer));
  for (const StageLayers& run : plan_.runs) {
    if (run.on_cpu()) continue;
    const size_t si = stages_.size();
    auto stage = std::make_unique<GpuStage>(
        devices.at(static_cast<size_t>(run.device)), hp, run,
        std::vector<bool>(static_cast<size_t>(hp.n_layer), true), shared_ff);
    uint64_t total = ends.upload_bytes(hp, plan_, si);
    for (int64_t il = run.first; il < run.last; ++il) {
      const StandardDecoder::Layer& l = m.layers()[static_cast<size_t>(il)];
      total += attention_upload_bytes(l.attn, hp) +
               ffn_upload_bytes(l.dense, l.moe, hp, layer_experts(placement_plan_.experts, il)) +
               upload_bytes(l.attn_norm, hp.n_embd) + upload_bytes(l.ffn_norm, hp.n_embd);
    }
    stage->weights = std::make_unique<DeviceWeights>(stage->device(), total);
    DeviceWeights& w = *stage->weights;
    upload_model_ends(ends, hp, plan_, *stage, si, ends_);
    for (int64_t il = run.first; il < run.last; ++il) {
      const StandardDecoder::Layer& src = m.layers()[static_cast<size_t>(il)];
      Layer& l = layers_[static_cast<size_t>(il)];
      l.attn_norm = w.floats(src.attn_norm, hp.n_embd, layer_tensor(il, "attn_norm"));
      l.ffn_norm = w.floats(src.ffn_norm, hp.n_embd, layer_tensor(il, "ffn_norm"));
      l.attn = upload_attention(w, src.attn, hp, il, /*gated_q=*/false);
      l.attn.extras.window = hp.layer_window(il);
      l.ffn = upload_ffn(w, src.dense, src.moe, hp, il, layer_experts(placement_plan_.experts, il));
      stage->ffn->expect_uploads(l.ffn);
    }
    stages_.push_back(std::move(stage));
  }
  if (!plan_.runs.front().on_cpu()) {
    embeddings_ = std::make_unique<GpuEmbeddings>(stages_.front()->device(), m.token_embd(),
                                                  ends_.token_embd);
  }
}

void GpuStandardDecoder::kv_slots_copied(const void* storage, int64_t from, int64_t to, int64_t n) {
  for (auto& s : stages_) s->kv->copy_slots(storage, from, to, n);
}

void GpuStandardDecoder::record_stage(GpuStage& s, const ForwardBatch& batch, int64_t n,
                                      bool first_run, bool last_run, bool with_stats) {
  const ModelHParams& hp = hparams_;
  const auto& kv_layers =
      s.kv->ensure(placement_.key, placement_.type, placement_.n_slots, placement_.max_slots);
  CommandList& cmd = *s.cmd;
  cmd.begin();
  GpuOps ops{s.device(), cmd};
  if (first_run) embeddings_->record(ops, batch.tokens, s.step.tokens(), s.x);
  s.begin(ops, n, first_run);
  const uint64_t x = s.x.address(), normed = s.normed.address(), delta = s.delta.address();
  for (int64_t il = s.layers().first; il < s.layers().last; ++il) {
    const Layer& l = layers_[static_cast<size_t>(il)];
    ops.rms_norm(x, hp.n_embd, l.attn_norm, normed, hp.n_embd, n, hp.n_embd, hp.rms_eps);
    ActivationInput normed_in(ops, s.normed_in, normed, hp.n_embd, n, hp.n_embd);
    s.attention->record(ops, l.attn, normed_in, s.step, placement_,
                        kv_layers[static_cast<size_t>(il)], s.inv_freq, delta, n);
    ops.add(x, delta, n * hp.n_embd);
    ops.rms_norm(x, hp.n_embd, l.ffn_norm, normed, hp.n_embd, n, hp.n_embd, hp.rms_eps);
    ActivationInput ffn_input(ops, s.normed_in, normed, hp.n_embd, n, hp.n_embd);
    const GpuFfnWeights* next =
        il + 1 < s.layers().last ? &layers_[static_cast<size_t>(il + 1)].ffn : nullptr;
    s.ffn->record(ops, l.ffn, il, ffn_input, s.normed, delta, n, next);
    ops.add(x, delta, n * hp.n_embd);
  }
  s.end(ops, n, last_run ? head_.get() : nullptr, layout_.logit_rows, with_stats);
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
  placement_.build(layout_.sequence, layout_.position, kv, 0);
  for (auto& s : stages_) {
    s->ensure(n);
    s->step.write(batch.tokens, layout_.position, layout_.sequence, &placement_);
  }
  StageSteps steps;
  steps.embed_on_host = [&](float* x) { embed_tokens(cpu_->token_embd(), batch.tokens, x); };
  steps.record = [&](size_t si, bool first_run, bool last_run) {
    record_stage(*stages_[si], batch, n, first_run, last_run, stats != nullptr);
  };
  steps.cpu_layers = [&](const StageLayers& run, float* x) {
    cpu_->forward_layers(batch, kv, run.first, run.last, x, pool, stats);
  };
  std::vector<StageSpan> spans = run_stages(plan_, stages_, n, host_x_, hp.n_embd, pool, steps);
  if (head_) {
    head_->release_retired();
    head_->read(logits, rows);
  } else {
    output_head(cpu_->output(), cpu_->output_norm(), hp.rms_eps, host_x_.data(), layout_.logit_rows,
                logits, pool);
  }
  timeline_ = merged_timeline(stages_, std::move(spans));
  if (stats) {
    for (auto& s : stages_) s->ffn->add_stats(*stats, n, s->layers().first, s->layers().last);
  }
}

}  // namespace strata::vk
