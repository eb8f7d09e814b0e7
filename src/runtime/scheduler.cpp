#include "runtime/scheduler.h"

#include <algorithm>

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

using Clock = std::chrono::steady_clock;

struct Scheduler::Slot {
  explicit Slot(KvPool& pool) : seq(pool) {}
  enum class State { idle, prefill, decode };
  State state = State::idle;
  KvSequence seq;
  std::vector<int32_t> tokens;  // the tokens whose k/v the sequence holds, in order
  Clock::time_point last_used{};
  // Hybrid models: the recurrent state after `tokens`, and a copy taken when the last prompt was
  // read (a recurrent state cannot be rolled back, so a shorter prefix needs a snapshot).
  std::vector<float> state_buffer, snapshot;
  int64_t snapshot_position = -1;

  // The running job.
  uint64_t id = 0;
  GenerationJob job;
  std::optional<Sampler> sampler;
  size_t prompt_done = 0;   // prompt tokens in the cache
  int32_t next_token = -1;  // sampled, not yet in the cache (decode state)
  JobResult result;
  Clock::time_point started{}, prefill_done{};
};

namespace {

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b, size_t limit) {
  size_t n = 0;
  const size_t max = std::min({a.size(), b.size(), limit});
  while (n < max && a[n] == b[n]) ++n;
  return n;
}

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

Scheduler::Scheduler(Model& model, ThreadPool& pool, SchedulerOptions options)
    : model_(model),
      pool_(pool),
      options_(options),
      kv_(model.hparams(),
          ((options.kv_positions > 0 ? options.kv_positions : options.n_ctx) + options.page_size -
           1) /
              options.page_size,
          options.page_size, options.kv_type, model.kv_layers()),
      recurrent_floats_(model.recurrent_state_floats()) {
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

SchedulerStats Scheduler::stats() const {
  std::lock_guard lock(mutex_);
  SchedulerStats s = stats_;
  s.kv_pages_total = kv_.total_pages();
  s.kv_page_size = kv_.page_size();
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
      wake_.wait(lock,
                 [&] { return stopping_ || !queue_.empty() || busy() || !cancelled_.empty(); });
      cancelled.swap(cancelled_);
      if (stopping_) {
        // Queued work is dropped; running work may finish until the deadline.
        while (!queue_.empty()) {
          dropped.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
        stop_now = !busy() || Clock::now() >= deadline_;
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
      for (int64_t i = 0; i < idle && !queue_.empty(); ++i) {
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
  slot.next_token = -1;
  slot.result = {};
  slot.result.prompt_tokens = static_cast<int64_t>(slot.job.prompt.size());
  slot.result.cached_tokens = static_cast<int64_t>(reused);
  slot.started = Clock::now();
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

bool Scheduler::step() {
  // Decode tokens first (one per running stream), then prompt chunks with what is left.
  struct Part {
    Slot* slot;
    int64_t begin, count;  // tokens [begin, begin + count) of `feed` belong to this slot
    bool wants_logits;
  };
  std::vector<Part> parts;
  std::vector<int32_t> feed;
  int64_t budget = options_.batch_tokens;
  auto reserve = [&](Slot& s, int64_t n) {
    const int64_t need = s.seq.length() + n;
    if (s.seq.reserve(need)) return true;
    const int64_t pages = (need + kv_.page_size() - 1) / kv_.page_size();
    return make_room(pages - s.seq.pages_held() + 1, &s) && s.seq.reserve(need);
  };
  for (auto& sp : slots_) {
    Slot& s = *sp;
    if (s.state != Slot::State::decode) continue;
    if (!reserve(s, 1)) {
      finish(s, FinishReason::error, "the KV cache is full (raise --kv-size or lower --parallel)");
      continue;
    }
    parts.push_back({&s, static_cast<int64_t>(feed.size()), 1, true});
    feed.push_back(s.next_token);
    --budget;
  }
  // Oldest prompts first, so a long prompt is not starved by newer ones.
  std::vector<Slot*> prefilling;
  for (auto& sp : slots_) {
    if (sp->state == Slot::State::prefill) prefilling.push_back(sp.get());
  }
  std::sort(prefilling.begin(), prefilling.end(),
            [](const Slot* a, const Slot* b) { return a->started < b->started; });
  if (!parts.empty()) budget = std::min(budget, options_.prefill_chunk);
  for (Slot* s : prefilling) {
    if (budget <= 0) break;
    const int64_t left = static_cast<int64_t>(s->job.prompt.size() - s->prompt_done);
    const int64_t n = std::min(left, budget);
    if (!reserve(*s, n)) {
      if (parts.empty() && s == prefilling.front() &&
          std::none_of(slots_.begin(), slots_.end(), [&](const auto& o) {
            return o.get() != s && o->state != Slot::State::idle;
          })) {
        finish(*s, FinishReason::error,
               "the prompt does not fit in the KV cache (raise --kv-size or lower --parallel)");
      }
      continue;  // waits for pages to be freed by running streams
    }
    parts.push_back({s, static_cast<int64_t>(feed.size()), n, n == left});
    feed.insert(feed.end(), s->job.prompt.begin() + static_cast<long>(s->prompt_done),
                s->job.prompt.begin() + static_cast<long>(s->prompt_done + n));
    budget -= n;
  }
  if (parts.empty()) return false;

  // One forward over every part.
  std::vector<SequenceKv> kv;
  std::vector<float*> states;
  std::vector<int32_t> sequences, logit_rows;
  std::vector<int64_t> positions;
  for (const Part& p : parts) {
    const int32_t index = static_cast<int32_t>(kv.size());
    kv.push_back(p.slot->seq.layers());
    states.push_back(p.slot->state_buffer.data());
    for (int64_t i = 0; i < p.count; ++i) {
      sequences.push_back(index);
      positions.push_back(p.slot->seq.length() + i);
    }
    if (p.wants_logits) logit_rows.push_back(static_cast<int32_t>(p.begin + p.count - 1));
  }
  const int64_t n_vocab = model_.hparams().n_vocab;
  // Reused across steps: 8 decode rows of a 152K vocabulary are 4.9 MB to zero-fill otherwise.
  logits_.resize(logit_rows.size() * static_cast<size_t>(n_vocab));
  std::vector<float>& logits = logits_;
  ForwardBatch batch;
  batch.tokens = feed;
  batch.sequences = sequences;
  batch.positions = positions;
  batch.logit_rows = logit_rows;
  if (recurrent_floats_ > 0) batch.recurrent = states;
  const auto t0 = Clock::now();
  model_.forward(batch, kv, logits.data(), pool_,
                 options_.record_experts ? &forward_stats_ : nullptr);
  const auto t1 = Clock::now();
  if (options_.record_experts) {
    // Published before any job of this step finishes, so a finished job's tokens are counted.
    std::lock_guard lock(mutex_);
    expert_counts_ = forward_stats_.expert_counts;
    counted_tokens_ += static_cast<int64_t>(feed.size());
  }

  uint64_t generated = 0;
  size_t row = 0;
  for (const Part& p : parts) {
    Slot& s = *p.slot;
    s.seq.set_length(s.seq.length() + p.count);
    s.tokens.insert(s.tokens.end(), feed.begin() + p.begin, feed.begin() + p.begin + p.count);
    if (s.state == Slot::State::prefill) s.prompt_done += static_cast<size_t>(p.count);
    if (!p.wants_logits) continue;
    const std::span<float> row_logits(logits.data() + row++ * n_vocab,
                                      static_cast<size_t>(n_vocab));
    if (s.state == Slot::State::prefill) {
      if (recurrent_floats_ > 0) {
        model_.recurrent_state_read(s.state_buffer.data());
        s.snapshot = s.state_buffer;  // the state after the whole prompt, for the next turn
        s.snapshot_position = s.seq.length();
      }
      s.state = Slot::State::decode;
      s.prefill_done = t1;
      s.result.prefill_seconds = seconds(t1 - s.started);
    }
    if (s.job.constraint && !s.job.constraint->mask(row_logits)) {
      finish(s, FinishReason::error, "the output format allows no token to come next");
      continue;
    }
    const int32_t token = s.sampler->sample(row_logits);
    const bool is_end = std::binary_search(s.job.end_tokens.begin(), s.job.end_tokens.end(), token);
    if (s.job.top_logprobs >= 0 && s.job.on_logprobs && !is_end)
      s.job.on_logprobs(s.sampler->logprobs(token, s.job.top_logprobs));
    s.sampler->accept(token);
    if (s.job.constraint) s.job.constraint->accept(token);
    if (is_end) {
      finish(s, FinishReason::stop);
      continue;
    }
    ++s.result.generated_tokens;
    ++generated;
    const bool go_on = !s.job.on_token || s.job.on_token(token);
    if (!go_on) {
      finish(s, FinishReason::stop);
    } else if (s.result.generated_tokens >= s.job.max_tokens ||
               s.seq.length() + 1 > options_.n_ctx) {
      finish(s, FinishReason::length);
    } else {
      s.next_token = token;
    }
  }
  std::lock_guard lock(mutex_);
  ++stats_.steps;
  stats_.generated_tokens += generated;
  stats_.busy_seconds += seconds(t1 - t0);
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
  GenerationJob job = std::move(slot.job);
  slot.job = {};
  {
    std::lock_guard lock(mutex_);
    ++stats_.jobs_finished;
    --stats_.slots_busy;
  }
  update_kv_stats();  // before on_done: a client that sees its end sees the accounting too
  if (job.on_done) job.on_done(slot.result);
}

}  // namespace strata
