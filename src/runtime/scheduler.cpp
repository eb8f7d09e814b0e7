#include "runtime/scheduler.h"

#include <algorithm>

#include "runtime/scheduler_slot.h"
#include "util/error.h"
#include "util/log.h"

namespace strata {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::stop:
      return "stop";
    case FinishReason::length:
      return "length";
    case FinishReason::cancelled:
      return "cancelled";
    case FinishReason::error:
      return "error";
  }
  return "?";
}

namespace {

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b, size_t limit) {
  size_t n = 0;
  const size_t max = std::min({a.size(), b.size(), limit});
  while (n < max && a[n] == b[n]) ++n;
  return n;
}

}  // namespace

DraftSources Scheduler::draft_sources() {
  const NextnHead* nextn = model_.exports_hidden() ? model_.nextn_head() : nullptr;
  return {.cost = &verify_cost_,
          .acceptance = &acceptance_,
          .history = answer_history_.capacity() > 0 ? &answer_history_ : nullptr,
          .nextn = nextn,
          .n_ctx = options_.n_ctx,
          .pool = &pool_};
}

Scheduler::Scheduler(Model& model, ThreadPool& pool, SchedulerOptions options)
    : model_(model),
      pool_(pool),
      options_(options),
      kv_(model.hparams(),
          ((options.kv_positions > 0 ? options.kv_positions : options.n_ctx) + options.page_size -
           1) /
              options.page_size,
          options.page_size, options.kv_type, model.kv_layers()),
      recurrent_floats_(model.recurrent_state_floats()),
      answer_history_(static_cast<size_t>(std::max<int64_t>(options.answer_history_tokens, 0))) {
  STRATA_CHECK(options.n_slots > 0, "need at least one slot, got {}", options.n_slots);
  STRATA_CHECK(options.n_ctx > 0, "context size must be positive, got {}", options.n_ctx);
  STRATA_CHECK(options.batch_tokens >= options.n_slots,
               "batch of {} tokens cannot hold a decode token for each of {} slots",
               options.batch_tokens, options.n_slots);
  kv_.set_copy_listener(&model);
  for (int i = 0; i < options.n_slots; ++i) {
    slots_.push_back(std::make_unique<Slot>(kv_));
    slots_.back()->state_buffer.assign(static_cast<size_t>(recurrent_floats_), 0.0f);
    if (recurrent_floats_ > 0) model_.recurrent_state_written(slots_.back()->state_buffer.data());
  }
  if (options.record_experts) {
    const ModelHParams& hp = model.hparams();
    forward_stats_.expert_counts.assign(static_cast<size_t>(hp.n_layer * hp.n_expert), 0);
  }
  stats_.slots_total = options.n_slots;
  worker_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() {
  shutdown(std::chrono::milliseconds(0));
  if (recurrent_floats_ > 0) {
    for (auto& slot : slots_) model_.recurrent_state_released(slot->state_buffer.data());
  }
}

std::optional<uint64_t> Scheduler::submit(GenerationJob job) {
  STRATA_CHECK(!job.prompt.empty(), "a generation needs at least one prompt token");
  STRATA_CHECK(job.max_tokens > 0, "max_tokens must be positive, got {}", job.max_tokens);
  const int64_t n_vocab = model_.hparams().n_vocab;
  for (int32_t t : job.prompt)
    STRATA_CHECK(t >= 0 && t < n_vocab, "token id {} is outside the vocabulary (0..{})", t,
                 n_vocab - 1);
  STRATA_CHECK(static_cast<int64_t>(job.prompt.size()) + job.max_tokens <= options_.n_ctx,
               "prompt ({} tokens) + max_tokens ({}) exceed the context size {}", job.prompt.size(),
               job.max_tokens, options_.n_ctx);
  std::sort(job.end_tokens.begin(), job.end_tokens.end());
  Sampler check(job.sampling);  // throws for invalid sampling settings, before queueing
  (void)check;
  std::lock_guard lock(mutex_);
  if (!device_lost_.empty()) throw DeviceLost(device_lost_);
  if (!accepting_ || static_cast<int64_t>(queue_.size()) >= options_.max_queue) return std::nullopt;
  const uint64_t id = next_id_++;
  queue_.push_back({id, std::move(job), Clock::now()});
  stats_.queue_depth = static_cast<int64_t>(queue_.size());
  wake_.notify_one();
  return id;
}

void Scheduler::cancel(uint64_t id) {
  std::lock_guard lock(mutex_);
  cancelled_.push_back(id);
  wake_.notify_one();
}

void Scheduler::shutdown(std::chrono::milliseconds grace) {
  {
    std::lock_guard lock(mutex_);
    if (!worker_.joinable()) return;
    accepting_ = false;
    stopping_ = true;
    deadline_ = Clock::now() + grace;
    wake_.notify_one();
  }
  worker_.join();
}

void Scheduler::hold_new_work(std::string reason) {
  std::lock_guard lock(mutex_);
  if (reason == hold_reason_) return;
  // Said when the hold starts and ends, not at each new reading in between.
  if (reason.empty()) {
    log::info("new requests start again");
  } else if (hold_reason_.empty()) {
    log::warn("new requests wait: {}", reason);
  }
  hold_reason_ = std::move(reason);
  wake_.notify_one();
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard lock(mutex_);
  SchedulerStats s = stats_;
  s.hold_reason = hold_reason_;
  s.draining = !accepting_;
  s.kv_pages_total = kv_.total_pages();
  s.kv_page_size = kv_.page_size();
  s.kv_bytes_per_position = kv_.bytes_per_position();
  s.recurrent_state_bytes =
      static_cast<int64_t>(slots_.size()) * recurrent_floats_ * static_cast<int64_t>(sizeof(float));
  return s;
}

std::string Scheduler::device_lost() const {
  std::lock_guard lock(mutex_);
  return device_lost_;
}

std::vector<uint64_t> Scheduler::expert_counts(int64_t* tokens) const {
  std::lock_guard lock(mutex_);
  if (tokens) *tokens = counted_tokens_;
  return expert_counts_;
}

void Scheduler::run() {
  // This thread drives the pool and nothing else: on its own CPU, never sharing a worker's.
  pool_.pin_caller();
  for (;;) {
    std::vector<Queued> admitted, dropped;
    std::vector<uint64_t> cancelled;
    bool stop_now = false;
    {
      std::unique_lock lock(mutex_);
      const auto busy = [&] {
        return std::any_of(slots_.begin(), slots_.end(),
                           [](const auto& s) { return s->state != Slot::State::idle; });
      };
      // Draining (stopping_): queued and running work may finish until the deadline; nothing
      // accepted is dropped before it.
      const auto drained = [&] {
        return stopping_ && (Clock::now() >= deadline_ || (queue_.empty() && !busy()));
      };
      const auto ready = [&] {
        return drained() || (!queue_.empty() && hold_reason_.empty()) || busy() ||
               !cancelled_.empty();
      };
      while (!ready()) {
        if (stopping_) {
          wake_.wait_until(lock, deadline_);
        } else {
          wake_.wait(lock);
        }
      }
      cancelled.swap(cancelled_);
      if (drained()) {
        while (!queue_.empty()) {
          dropped.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
        stop_now = true;
      }
      // Cancelled jobs still in the queue never start.
      for (auto it = queue_.begin(); it != queue_.end();) {
        if (std::find(cancelled.begin(), cancelled.end(), it->id) != cancelled.end()) {
          dropped.push_back(std::move(*it));
          it = queue_.erase(it);
        } else {
          ++it;
        }
      }
      const auto idle = std::count_if(slots_.begin(), slots_.end(),
                                      [](const auto& s) { return s->state == Slot::State::idle; });
      for (int64_t i = 0; i < idle && !queue_.empty() && hold_reason_.empty(); ++i) {
        admitted.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      stats_.queue_depth = static_cast<int64_t>(queue_.size());
    }
    for (Queued& q : dropped) {
      JobResult r;
      r.reason = FinishReason::cancelled;
      r.prompt_tokens = static_cast<int64_t>(q.job.prompt.size());
      if (q.job.on_done) q.job.on_done(r);
    }
    for (auto& slot : slots_) {
      if (slot->state != Slot::State::idle &&
          (stop_now || std::find(cancelled.begin(), cancelled.end(), slot->id) != cancelled.end()))
        finish(*slot, FinishReason::cancelled);
    }
    if (stop_now) break;
    for (Queued& q : admitted) admit(std::move(q));
    try {
      if (!step()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    } catch (const DeviceLost& e) {
      // Nothing can run any more: every job, running or queued, ends; new ones are refused.
      log::error("generation step failed: {}", e.what());
      std::vector<Queued> waiting;
      {
        std::lock_guard lock(mutex_);
        device_lost_ = e.what();
        waiting.assign(std::make_move_iterator(queue_.begin()),
                       std::make_move_iterator(queue_.end()));
        queue_.clear();
        stats_.queue_depth = 0;
      }
      for (auto& slot : slots_) {
        if (slot->state != Slot::State::idle) finish(*slot, FinishReason::error, e.what(), true);
      }
      for (Queued& q : waiting) {
        JobResult r;
        r.reason = FinishReason::error;
        r.error = e.what();
        r.device_lost = true;
        r.prompt_tokens = static_cast<int64_t>(q.job.prompt.size());
        if (q.job.on_done) q.job.on_done(r);
      }
    } catch (const std::exception& e) {
      // A failing step (e.g. out of memory) ends the jobs in it; the server keeps running.
      log::error("generation step failed: {}", e.what());
      for (auto& slot : slots_) {
        if (slot->state != Slot::State::idle) finish(*slot, FinishReason::error, e.what());
      }
    }
    update_kv_stats();
  }
  for (auto& slot : slots_) slot->seq.release();
}

Scheduler::Resume Scheduler::resume_point(const Slot& s, size_t match) const {
  if (recurrent_floats_ == 0) return {match, nullptr};
  if (match > 0 && match == static_cast<size_t>(s.seq.length())) return {match, &s.state_buffer};
  if (s.snapshot_position > 0 && static_cast<size_t>(s.snapshot_position) <= match)
    return {static_cast<size_t>(s.snapshot_position), &s.snapshot};
  return {0, nullptr};
}

void Scheduler::admit(Queued q) {
  // The idle slot that can resume the longest prefix of this prompt (least recently used on
  // ties) hosts it; if another slot can resume a longer one, its pages are shared instead.
  const std::vector<int32_t>& prompt = q.job.prompt;
  const size_t limit = prompt.size() - 1;  // at least one token must run to produce logits
  auto resume_of = [&](const Slot& s) {
    return resume_point(s,
                        common_prefix(s.tokens, prompt, std::min<size_t>(limit, s.seq.length())));
  };
  Slot* host = nullptr;
  Resume host_resume;
  for (auto& s : slots_) {
    if (s->state != Slot::State::idle) continue;
    const Resume r = resume_of(*s);
    if (!host || r.position > host_resume.position ||
        (r.position == host_resume.position && s->last_used < host->last_used)) {
      host = s.get();
      host_resume = r;
    }
  }
  STRATA_CHECK(host, "no idle slot to admit a job into");
  Slot* donor = nullptr;
  Resume donor_resume = host_resume;
  for (auto& s : slots_) {
    if (s.get() == host) continue;
    const Resume r = resume_of(*s);
    if (r.position > donor_resume.position) donor = s.get(), donor_resume = r;
  }
  Slot& slot = *host;
  Resume used = host_resume;
  if (donor && slot.seq.share_prefix(donor->seq, static_cast<int64_t>(donor_resume.position))) {
    used = donor_resume;
    slot.snapshot_position = -1;  // it described this slot's previous conversation
  } else {
    slot.seq.truncate(static_cast<int64_t>(host_resume.position));  // (or no page to copy into)
  }
  const size_t reused = used.position;
  slot.tokens.assign(prompt.begin(), prompt.begin() + static_cast<long>(reused));
  if (recurrent_floats_ > 0) {
    // A model keeping states on a GPU learns of every host read and write of a state buffer.
    if (reused == 0 || !used.state) {
      std::fill(slot.state_buffer.begin(), slot.state_buffer.end(), 0.0f);
      model_.recurrent_state_written(slot.state_buffer.data());
    } else if (used.state != &slot.state_buffer) {
      // Another slot's live state or a snapshot (a host copy: the hook does nothing for it).
      model_.recurrent_state_read(const_cast<float*>(used.state->data()));
      std::copy(used.state->begin(), used.state->end(), slot.state_buffer.begin());
      model_.recurrent_state_written(slot.state_buffer.data());
    }
    if (slot.snapshot_position > static_cast<int64_t>(reused)) slot.snapshot_position = -1;
  }

  slot.id = q.id;
  slot.job = std::move(q.job);
  slot.sampler.emplace(slot.job.sampling);
  for (int32_t t : slot.job.prompt) slot.sampler->accept(t, /*generated=*/false);
  slot.prompt_done = reused;
  slot.pending.clear();
  slot.draft.clear();
  slot.result = {};
  slot.result.prompt_tokens = static_cast<int64_t>(slot.job.prompt.size());
  slot.result.cached_tokens = static_cast<int64_t>(reused);
  slot.started = Clock::now();
  if (options_.on_job_finished) slot.cpu_at_start = sample_cpu_time();
  slot.result.queue_seconds = seconds(slot.started - q.submitted);
  slot.state = Slot::State::prefill;
  std::lock_guard lock(mutex_);
  ++stats_.jobs_started;
  ++stats_.slots_busy;
  stats_.prompt_tokens += slot.job.prompt.size();
  stats_.cached_prompt_tokens += reused;
}

bool Scheduler::make_room(int64_t pages_needed, const Slot* keep) {
  // Evict the caches of idle slots, least recently used first, until enough pages are free.
  while (kv_.free_pages() < pages_needed) {
    Slot* victim = nullptr;
    for (auto& s : slots_) {
      if (s.get() == keep || s->state != Slot::State::idle || s->seq.pages_held() == 0) continue;
      if (!victim || s->last_used < victim->last_used) victim = s.get();
    }
    if (!victim) return false;
    victim->seq.release();
    victim->tokens.clear();
    victim->snapshot_position = -1;
  }
  return true;
}

void Scheduler::update_kv_stats() {
  // Pages shared by several sequences count once in `used`; `active` counts each running
  // sequence's table (an upper bound when running sequences share a prefix).
  int64_t active = 0;
  for (const auto& s : slots_) {
    if (s->state != Slot::State::idle) active += s->seq.pages_held();
  }
  std::lock_guard lock(mutex_);
  stats_.kv_pages_used = kv_.total_pages() - kv_.free_pages();
  stats_.kv_pages_active = std::min(active, stats_.kv_pages_used);
}

void Scheduler::finish(Slot& slot, FinishReason reason, std::string error, bool device_lost) {
  slot.result.reason = reason;
  slot.result.error = std::move(error);
  slot.result.device_lost = device_lost;
  const auto now = Clock::now();
  if (slot.state == Slot::State::decode)
    slot.result.decode_seconds = seconds(now - slot.prefill_done);
  slot.state = Slot::State::idle;
  slot.last_used = now;
  slot.sampler.reset();
  // The cache keeps exactly the tokens it holds (a sampled token not yet run is not in it).
  slot.tokens.resize(static_cast<size_t>(slot.seq.length()));
  // What was generated joins the answers later requests draft from (a failed step's not).
  const size_t prompt = slot.job.prompt.size();
  if (reason != FinishReason::error && slot.tokens.size() > prompt) {
    const std::span<const int32_t> tokens(slot.tokens);
    answer_history_.add(tokens.first(prompt), tokens.subspan(prompt));
  }
  GenerationJob job = std::move(slot.job);
  slot.job = {};
  {
    std::lock_guard lock(mutex_);
    ++stats_.jobs_finished;
    --stats_.slots_busy;
  }
  update_kv_stats();  // before on_done: a client that sees its end sees the accounting too
  if (job.on_done) job.on_done(slot.result);
  if (options_.on_job_finished)
    options_.on_job_finished(slot.result, load_between(slot.cpu_at_start, sample_cpu_time()));
}

}  // namespace strata
