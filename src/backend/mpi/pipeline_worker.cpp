#include "backend/mpi/pipeline_worker.h"

#include <map>
#include <memory>

#include "backend/mpi/rank_kv.h"
#include "backend/mpi/step_message.h"
#include "util/log.h"

namespace strata::mpi {

namespace {

class PipelineWorker {
 public:
  PipelineWorker(MpiLink& link, DecoderModel& model, plan::LayerRange range, ThreadPool& pool)
      : link_(link),
        model_(model),
        range_(range),
        pool_(pool),
        slice_(state_slice(model, range)),
        kv_(local_kv_layers(model, range), model.hparams().n_head_kv, model.hparams().head_dim) {}

  void run() {
    for (;;) {
      const std::vector<uint8_t> message =
          link_.receive(0, Tag::command, "rank 0's next command", /*idle=*/true);
      WireReader r(message);
      const auto op = r.get<Op>();
      switch (op) {
        case Op::forward:
          forward(read_step(r));
          break;
        case Op::state_get:
          send_state(r.get<uint64_t>());
          break;
        case Op::state_drop:
          states_.erase(r.get<uint64_t>());
          break;
        case Op::kv_copy: {
          const auto key = r.get<uint64_t>();
          const auto from = r.get<int64_t>(), to = r.get<int64_t>(), n = r.get<int64_t>();
          kv_.copy_slots(key, from, to, n);
          break;
        }
        case Op::shutdown:
          return;
        default:
          fail("{}: unknown command {} from rank 0", link_.describe(link_.rank()),
               static_cast<int>(op));
      }
    }
  }

 private:
  static std::vector<bool> local_kv_layers(const DecoderModel& model, plan::LayerRange range) {
    std::vector<bool> out = model.kv_layers();
    for (int64_t il = 0; il < static_cast<int64_t>(out.size()); ++il)
      if (il < range.first || il >= range.last) out[static_cast<size_t>(il)] = false;
    return out;
  }

  // This rank's copy of rank 0's state buffer `key`: all zeros when new (a fresh sequence).
  float* state(uint64_t key) {
    std::unique_ptr<float[]>& buffer = states_[key];
    if (!buffer) {
      // Only the header and this rank's slice are ever touched: the rest is never committed.
      buffer.reset(new float[static_cast<size_t>(model_.recurrent_state_floats())]);
      buffer[0] = 0;
      std::fill(buffer.get() + slice_.first, buffer.get() + slice_.last, 0.0f);
    }
    return buffer.get();
  }

  void send_state(uint64_t key) {
    WireWriter w;
    const auto it = states_.find(key);
    if (it == states_.end()) {
      w.put_array<float>({});
    } else {
      w.put_array<float>({it->second.get() + slice_.first, static_cast<size_t>(slice_.size())});
    }
    link_.send(0, Tag::reply, w.bytes());
  }

  // The caches and states of a step as rank 0 sees them.
  struct Step {
    std::vector<std::vector<ops::KvLayerView>> views;
    std::vector<SequenceKv> kv;
    std::vector<float*> states;
  };

  void prepare(StepCommand& step, Step& out) {
    std::vector<int64_t> max_position(step.sequences.size(), 0);
    for (size_t t = 0; t < step.sequence.size(); ++t) {
      const auto s = static_cast<size_t>(step.sequence[t]);
      if (s < max_position.size()) max_position[s] = std::max(max_position[s], step.position[t]);
    }
    for (size_t s = 0; s < step.sequences.size(); ++s) {
      StepSequence& seq = step.sequences[s];
      if (step.has_kv) {
        out.views.push_back(kv_.views(seq.kv, max_position[s]));
      } else {
        out.views.emplace_back(static_cast<size_t>(model_.hparams().n_layer));
      }
      if (step.has_state) {
        float* buffer = state(seq.state_key);
        buffer[0] = seq.state_header;
        if (!seq.state_part.empty()) {
          STRATA_CHECK(static_cast<int64_t>(seq.state_part.size()) == slice_.size(),
                       "rank 0 sent {} floats of recurrent state where this rank keeps {}",
                       seq.state_part.size(), slice_.size());
          std::copy(seq.state_part.begin(), seq.state_part.end(), buffer + slice_.first);
        }
        out.states.push_back(buffer);
      }
    }
    for (const auto& v : out.views) out.kv.emplace_back(v);
  }

  // Runs this rank's layers on each micro-batch's hidden states as the previous rank sends them
  // and passes them on; a failure travels on in their place, so rank 0 reports it and no rank
  // waits forever.
  void forward(StepCommand step) {
    Step prepared;
    std::string error;
    try {
      prepare(step, prepared);
    } catch (const std::exception& e) {
      error = e.what();
    }
    const int next = (link_.rank() + 1) % link_.size();
    for (size_t g = 0; g + 1 < step.groups.size(); ++g) {
      const int64_t begin = step.groups[g], end = step.groups[g + 1];
      const std::vector<uint8_t> message =
          link_.receive(link_.rank() - 1, Tag::hidden, "the hidden states of a step");
      WireReader r(message);
      HiddenStates hidden = HiddenStates::read(r);
      if (hidden.error.empty() && error.empty()) {
        try {
          ForwardStats stats;
          if (step.count_experts) stats.expert_counts.swap(hidden.expert_counts);
          STRATA_CHECK(
              static_cast<int64_t>(hidden.x.size()) == (end - begin) * model_.hparams().n_embd,
              "{} hidden values for {} rows", hidden.x.size(), end - begin);
          const ForwardBatch batch = group_batch(step, begin, end, prepared.states);
          model_.forward_layers(batch, prepared.kv, range_.first, range_.last, hidden.x.data(),
                                pool_, &stats);
          hidden.distinct_experts += stats.distinct_experts;
          hidden.expert_counts.swap(stats.expert_counts);
        } catch (const std::exception& e) {
          error = e.what();
        }
      }
      if (hidden.error.empty() && !error.empty()) {
        hidden.error = fmt::format("{}: {}", link_.describe(link_.rank()), error);
        log::error("{}", hidden.error);
      }
      WireWriter w;
      hidden.write(w);
      link_.start_send(next, Tag::hidden, std::move(w.bytes()));
    }
    link_.finish_sends();
  }

  MpiLink& link_;
  DecoderModel& model_;
  plan::LayerRange range_;
  ThreadPool& pool_;
  StateSlice slice_;
  RankKvStores kv_;
  std::map<uint64_t, std::unique_ptr<float[]>> states_;
};

}  // namespace

void run_pipeline_worker(MpiLink& link, DecoderModel& model, plan::LayerRange range,
                         ThreadPool& pool) {
  PipelineWorker(link, model, range, pool).run();
}

}  // namespace strata::mpi
