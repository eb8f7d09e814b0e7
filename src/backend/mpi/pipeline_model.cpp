#include "backend/mpi/pipeline_model.h"

#include <algorithm>

#include "model/decoder.h"
#include "ops/rms_norm.h"
#include "util/error.h"
#include "util/log.h"
#include "util/profiler.h"

namespace strata::mpi {

PipelineModel::PipelineModel(std::unique_ptr<MpiLink> link, std::unique_ptr<DecoderModel> local,
                             std::vector<plan::LayerRange> ranges, std::vector<RankIdentity> ranks)
    : Model(GgufFile::parse(local->file().name(), local->file().bytes()), local->hparams()),
      link_(std::move(link)),
      local_(std::move(local)),
      ranges_(std::move(ranges)),
      ranks_(std::move(ranks)) {
  STRATA_CHECK(static_cast<int>(ranges_.size()) == link_->size() && ranges_.size() == ranks_.size(),
               "a pipeline of {} ranks with {} layer ranges", link_->size(), ranges_.size());
  for (const plan::LayerRange& range : ranges_) slices_.push_back(state_slice(*local_, range));
  const std::vector<bool> kv_layers = local_->kv_layers();
  for (int64_t il = 0; il < hparams_.n_layer && first_kv_layer_ < 0; ++il)
    if (kv_layers[static_cast<size_t>(il)]) first_kv_layer_ = il;
  const plan::ModelInventory inventory = plan::inventory_from_gguf(file_);
  const std::vector<uint64_t> layer_bytes = plan::layer_weight_bytes(inventory);
  for (size_t r = 0; r < ranges_.size(); ++r) {
    rank_bytes_.push_back(plan::range_bytes(layer_bytes, ranges_[r]) +
                          (r == 0 ? plan::head_weight_bytes(inventory) : 0));
  }
}

PipelineModel::~PipelineModel() {
  try {
    WireWriter w;
    w.put(Op::shutdown);
    send_to_others(w.bytes());
  } catch (const std::exception& e) {
    log::warn("could not tell the other ranks to stop: {}", e.what());
  }
}

void PipelineModel::send_command(int rank, const std::vector<uint8_t>& bytes) const {
  link_->send(rank, Tag::command, bytes);
}

void PipelineModel::send_to_others(const std::vector<uint8_t>& bytes) const {
  for (int r = 1; r < link_->size(); ++r) send_command(r, bytes);
}

StepCommand PipelineModel::step_command(const ForwardBatch& batch,
                                        std::span<const SequenceKv> kv) const {
  StepCommand step;
  // Rows in the order the decoder runs them: the other ranks' decoders keep that order.
  step.tokens.assign(rows_.tokens().begin(), rows_.tokens().end());
  step.sequence.assign(rows_.sequence().begin(), rows_.sequence().end());
  step.position.assign(rows_.position().begin(), rows_.position().end());
  step.has_kv = first_kv_layer_ >= 0;
  step.has_state = local_->recurrent_state_floats() > 0;
  step.sequences.resize(kv.size());
  for (size_t s = 0; s < kv.size(); ++s) {
    StepSequence& seq = step.sequences[s];
    if (step.has_kv) {
      const ops::KvLayerView& view = kv[s][static_cast<size_t>(first_kv_layer_)];
      seq.kv.key = reinterpret_cast<uint64_t>(view.k);
      seq.kv.type = view.type;
      seq.kv.head_row_bytes = view.head_row_bytes;
      seq.kv.page_size = view.pages ? view.page_size : 0;
      seq.kv.capacity = view.capacity;
      if (view.pages) {
        const int64_t pages = (view.capacity + view.page_size - 1) / view.page_size;
        seq.kv.pages.assign(view.pages, view.pages + pages);
      }
    }
    if (step.has_state) {
      const float* state = batch.recurrent[s];
      seq.state_key = reinterpret_cast<uint64_t>(state);
      seq.state_header = state[0];
    }
  }
  return step;
}

void PipelineModel::forward(const ForwardBatch& batch, std::span<const SequenceKv> kv,
                            float* logits, ThreadPool& pool, ForwardStats* stats) {
  const ModelHParams& hp = hparams_;
  const bool recurrent = local_->recurrent_state_floats() > 0;
  rows_.build(batch, kv, hp.n_layer, recurrent, hp.arch);
  STRATA_CHECK(!recurrent || batch.recurrent.size() == kv.size(),
               "{}: {} recurrent states for {} sequences", hp.arch, batch.recurrent.size(),
               kv.size());
  const int64_t n = rows_.size();
  const bool count_experts =
      stats && static_cast<int64_t>(stats->expert_counts.size()) == hp.n_layer * hp.n_expert;

  // Every other rank learns the step first, so it prepares its caches while this one computes.
  StepCommand step = step_command(batch, kv);
  step.count_experts = count_experts;
  step.groups = micro_batches(step.sequence, link_->size());
  if (step.groups.size() > 2 && !said_micro_batches_) {
    log::info("a step of {} sequences runs as {} micro-batches down the pipeline", kv.size(),
              step.groups.size() - 1);
    said_micro_batches_ = true;
  }
  send_step(step, batch.recurrent);
  x_.resize(static_cast<size_t>(n * hp.n_embd));
  {
    STRATA_PROFILE("embedding");
    embed_tokens(local_->token_embd(), rows_.tokens(), x_.data());
  }
  run_pipeline(step, batch.recurrent, kv, pool, stats);
  rows_.advance_states(batch.recurrent);
  for (const float* state : batch.recurrent) written_.erase(state);

  if (batch.hidden) {
    for (int64_t i = 0; i < n; ++i) {
      ops::rms_norm(x_.data() + i * hp.n_embd, local_->output_norm(),
                    batch.hidden + rows_.batch_row(i) * hp.n_embd, hp.n_embd, hp.rms_eps);
    }
  }
  STRATA_PROFILE("output head");
  output_head(local_->output(), local_->output_norm(), hp.rms_eps, x_.data(), rows_.logit_rows(),
              logits, head_workspace_, pool);
}

void PipelineModel::send_step(StepCommand& step, std::span<float* const> states) {
  STRATA_PROFILE("pipeline commands");
  for (int r = 1; r < link_->size(); ++r) {
    // Each rank gets its part of the states rank 0 changed since it last saw them.
    const StateSlice& slice = slices_[static_cast<size_t>(r)];
    for (size_t s = 0; s < step.sequences.size() && step.has_state; ++s) {
      StepSequence& seq = step.sequences[s];
      seq.state_part.clear();
      const float* state = states[s];
      if (slice.size() > 0 && written_.count(state))
        seq.state_part.assign(state + slice.first, state + slice.last);
    }
    WireWriter w;
    w.put(Op::forward);
    write_step(w, step);
    send_command(r, w.bytes());
  }
}

void PipelineModel::run_pipeline(const StepCommand& step, std::span<float* const> states,
                                 std::span<const SequenceKv> kv, ThreadPool& pool,
                                 ForwardStats* stats) {
  const ModelHParams& hp = hparams_;
  // Each micro-batch goes down the pipeline as soon as this rank ran its layers on it.
  const size_t groups = step.groups.size() - 1;
  const std::vector<uint64_t> no_counts(
      step.count_experts ? static_cast<size_t>(hp.n_layer * hp.n_expert) : 0, 0);
  for (size_t g = 0; g < groups; ++g) {
    const int64_t begin = step.groups[g], end = step.groups[g + 1];
    const ForwardBatch group = group_batch(step, begin, end, states);
    float* x = x_.data() + begin * hp.n_embd;
    local_->forward_layers(group, kv, 0, ranges_[0].last, x, pool, stats);
    STRATA_PROFILE("pipeline");
    HiddenStates hidden;
    hidden.x.assign(x, x + (end - begin) * hp.n_embd);
    hidden.expert_counts = no_counts;  // the other ranks add theirs
    WireWriter w;
    hidden.write(w);
    link_->start_send(1, Tag::hidden, std::move(w.bytes()));
  }
  // Back from the last rank, in order; a rank's failure comes in place of its hidden states.
  std::string error;
  for (size_t g = 0; g < groups; ++g) {
    STRATA_PROFILE("pipeline");
    const int64_t begin = step.groups[g], end = step.groups[g + 1];
    const std::vector<uint8_t> message =
        link_->receive(link_->size() - 1, Tag::hidden, "the hidden states of a step");
    WireReader r(message);
    const HiddenStates hidden = HiddenStates::read(r);
    if (!hidden.error.empty()) {
      if (error.empty()) error = hidden.error;
      continue;
    }
    STRATA_CHECK(static_cast<int64_t>(hidden.x.size()) == (end - begin) * hp.n_embd,
                 "{} sent {} hidden values for {} rows", link_->describe(link_->size() - 1),
                 hidden.x.size(), end - begin);
    std::copy(hidden.x.begin(), hidden.x.end(), x_.begin() + begin * hp.n_embd);
    if (stats) {
      stats->distinct_experts += hidden.distinct_experts;
      for (size_t i = 0; i < hidden.expert_counts.size() && step.count_experts; ++i)
        stats->expert_counts[i] += hidden.expert_counts[i];
    }
  }
  link_->finish_sends();
  STRATA_CHECK(error.empty(), "{}", error);
}

void PipelineModel::kv_slots_copied(const void* storage, int64_t from, int64_t to, int64_t n) {
  WireWriter w;
  w.put(Op::kv_copy);
  w.put(reinterpret_cast<uint64_t>(storage));
  w.put(from);
  w.put(to);
  w.put(n);
  send_to_others(w.bytes());
}

void PipelineModel::recurrent_state_read(float* state) {
  if (written_.count(state)) return;  // the host's copy is the newest
  for (int r = 1; r < link_->size(); ++r) {
    const StateSlice& slice = slices_[static_cast<size_t>(r)];
    if (slice.size() == 0) continue;
    WireWriter w;
    w.put(Op::state_get);
    w.put(reinterpret_cast<uint64_t>(state));
    send_command(r, w.bytes());
    const std::vector<uint8_t> message = link_->receive(r, Tag::reply, "a recurrent state");
    WireReader reader(message);
    const std::vector<float> part = reader.get_array<float>();
    if (part.empty()) continue;  // that rank never saw this buffer: the host's copy stands
    STRATA_CHECK(static_cast<int64_t>(part.size()) == slice.size(),
                 "{} sent {} floats of recurrent state where it keeps {}", link_->describe(r),
                 part.size(), slice.size());
    std::copy(part.begin(), part.end(), state + slice.first);
  }
}

void PipelineModel::recurrent_state_written(const float* state) {
  written_.insert(state);
}

void PipelineModel::recurrent_state_released(const float* state) {
  written_.erase(state);
  WireWriter w;
  w.put(Op::state_drop);
  w.put(reinterpret_cast<uint64_t>(state));
  send_to_others(w.bytes());
}

std::string PipelineModel::placement_summary() const {
  std::string out = fmt::format("layers across {} MPI ranks:", link_->size());
  for (size_t r = 0; r < ranges_.size(); ++r) {
    out += fmt::format(" rank {} ({}) layers {}-{}{};", r, ranks_[r].host, ranges_[r].first,
                       ranges_[r].last - 1, r == 0 ? " + embeddings and output head" : "");
  }
  out.pop_back();
  return out;
}

std::vector<Model::DeviceMemory> PipelineModel::device_memory() const {
  std::vector<DeviceMemory> out;
  for (size_t r = 0; r < ranges_.size(); ++r) {
    DeviceMemory m;
    m.device = fmt::format("rank {} ({})", r, ranks_[r].host);
    m.allocated_bytes = rank_bytes_[r];
    // Ranks on one host share its RAM, as the split counts it.
    const auto sharing = std::count_if(ranks_.begin(), ranks_.end(), [&](const RankIdentity& o) {
      return o.host == ranks_[r].host;
    });
    m.budget_bytes = ranks_[r].ram_available / static_cast<uint64_t>(sharing);
    out.push_back(m);
  }
  return out;
}

std::vector<Model::LayerDevices> PipelineModel::layer_devices() const {
  std::vector<LayerDevices> out = local_->layer_devices();
  for (size_t r = 0; r < ranges_.size(); ++r) {
    const std::string device = fmt::format("rank {} ({})", r, ranks_[r].host);
    for (int64_t il = ranges_[r].first; il < ranges_[r].last; ++il) {
      LayerDevices& l = out[static_cast<size_t>(il)];
      l.attention = device;
      for (auto& [name, count] : l.experts) name = device;
    }
  }
  return out;
}

}  // namespace strata::mpi
