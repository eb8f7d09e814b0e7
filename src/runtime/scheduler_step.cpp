// One scheduler step in three parts: build the batch (every decoding slot's pending tokens and
// draft, then prompt chunks with the tokens left), run it through the model, and accept what the
// logits say: draw each slot's tokens, keep the drafted tokens the model drew too, and roll back
// the rest.
//
// A draft is checked by drawing every position in order from the model's own logits, exactly as
// without a draft, and stopping at the first drawn token that differs from the drafted one: the
// sampler and a job's constraint only ever see kept tokens, so neither needs rolling back, and
// the random stream is the one a draft-free run draws. What the step wrote for rejected tokens
// is rolled back: the KV length, and a hybrid model's recurrent state (restored from a copy taken
// before the step; the kept draft tokens then run again in the next step, ahead of its new token,
// and that step drafts nothing).

#include <algorithm>

#include "runtime/scheduler.h"
#include "runtime/scheduler_slot.h"
#include "util/error.h"
#include "util/log.h"

namespace strata {

struct Scheduler::Part {
  Slot* slot = nullptr;
  int64_t begin = 0, count = 0;  // rows [begin, begin + count) of the batch are this slot's
  int64_t drafted = 0;           // the last `drafted` of them are a draft to check
  bool wants_logits = false;     // then rows [begin + count - drafted - 1, begin + count) have
};

struct Scheduler::StepBatch {
  std::vector<Part> parts;
  std::vector<int32_t> feed;
  size_t row = 0;  // accept_results: the next row of logits
  Clock::time_point ran{};
};

bool Scheduler::step() {
  StepBatch batch = build_batch();
  if (batch.parts.empty()) return false;
  const auto t0 = Clock::now();
  run_batch(batch);
  batch.ran = Clock::now();
  if (batch.parts.size() > 1) {
    for (const Part& p : batch.parts) p.slot->result.shared_steps = true;
  }
  // A lone decoding sequence: the step's time is what its token and draft cost.
  if (batch.parts.size() == 1 && batch.parts[0].slot->state == Slot::State::decode)
    verify_cost_.record(static_cast<int>(batch.parts[0].count), seconds(batch.ran - t0));
  {
    // Counted before any job of the step ends: a client that sees its end sees its step.
    std::lock_guard lock(mutex_);
    ++stats_.steps;
    stats_.busy_seconds += seconds(batch.ran - t0);
  }
  accept_results(batch);
  return true;
}

void Scheduler::count_stat(uint64_t SchedulerStats::*counter, int64_t n) {
  std::lock_guard lock(mutex_);
  stats_.*counter += static_cast<uint64_t>(n);
}

bool Scheduler::reserve(Slot& s, int64_t n) {
  const int64_t need = s.seq.length() + n;
  if (s.seq.reserve(need)) return true;
  const int64_t pages = (need + kv_.page_size() - 1) / kv_.page_size();
  return make_room(pages - s.seq.pages_held() + 1, &s) && s.seq.reserve(need);
}

// ---- build ------------------------------------------------------------------------------

Scheduler::StepBatch Scheduler::build_batch() {
  StepBatch b;
  int64_t budget = options_.batch_tokens;
  // Decoding slots first: their pending tokens, then drafts from what the budget leaves.
  std::vector<Slot*> decoding;
  for (auto& sp : slots_) {
    Slot& s = *sp;
    if (s.state != Slot::State::decode) continue;
    if (!reserve(s, static_cast<int64_t>(s.pending.size()))) {
      finish(s, FinishReason::error, "the KV cache is full (raise --kv-size or lower --parallel)");
      continue;
    }
    decoding.push_back(&s);
    budget -= static_cast<int64_t>(s.pending.size());
  }
  for (Slot* s : decoding) {
    s->draft = propose_draft(*s, budget);
    const auto drafted = static_cast<int64_t>(s->draft.size());
    budget -= drafted;
    b.parts.push_back({s, static_cast<int64_t>(b.feed.size()),
                       static_cast<int64_t>(s->pending.size()) + drafted, drafted, true});
    b.feed.insert(b.feed.end(), s->pending.begin(), s->pending.end());
    b.feed.insert(b.feed.end(), s->draft.begin(), s->draft.end());
  }
  // Oldest prompts first, so a long prompt is not starved by newer ones.
  std::vector<Slot*> prefilling;
  for (auto& sp : slots_) {
    if (sp->state == Slot::State::prefill) prefilling.push_back(sp.get());
  }
  std::sort(prefilling.begin(), prefilling.end(),
            [](const Slot* a, const Slot* c) { return a->started < c->started; });
  if (!b.parts.empty()) budget = std::min(budget, options_.prefill_chunk);
  for (Slot* s : prefilling) {
    if (budget <= 0) break;
    const int64_t left = static_cast<int64_t>(s->job.prompt.size() - s->prompt_done);
    const int64_t n = std::min(left, budget);
    if (!reserve(*s, n)) {
      if (b.parts.empty() && s == prefilling.front() &&
          std::none_of(slots_.begin(), slots_.end(), [&](const auto& o) {
            return o.get() != s && o->state != Slot::State::idle;
          })) {
        finish(*s, FinishReason::error,
               "the prompt does not fit in the KV cache (raise --kv-size or lower --parallel)");
      }
      continue;  // waits for pages to be freed by running streams
    }
    b.parts.push_back({s, static_cast<int64_t>(b.feed.size()), n, 0, n == left});
    b.feed.insert(b.feed.end(), s->job.prompt.begin() + static_cast<long>(s->prompt_done),
                  s->job.prompt.begin() + static_cast<long>(s->prompt_done + n));
    budget -= n;
  }
  return b;
}

std::vector<int32_t> Scheduler::propose_draft(Slot& s, int64_t budget) {
  const GenerationJob& job = s.job;
  if (!job.drafter || job.max_draft <= 0) return {};
  // Tokens kept from a rolled-back step run again first, undrafted: a second rejection would
  // restore the state from before them too, and they would never be committed.
  if (s.pending.size() > 1) return {};
  const auto pending = static_cast<int64_t>(s.pending.size());
  // Each drafted token gives one more drawn token at most, and runs at a position of its own.
  const int64_t limit =
      std::min({job.max_draft, budget, job.max_tokens - s.result.generated_tokens - 1,
                options_.n_ctx - (s.seq.length() + pending)});
  if (limit <= 0) return {};
  std::vector<int32_t> context = s.tokens;
  context.insert(context.end(), s.pending.begin(), s.pending.end());
  std::vector<int32_t> draft;
  try {
    draft = job.drafter->propose(context, limit);
  } catch (const std::exception& e) {
    log::warn("the drafter failed ({}); this step runs without a draft", e.what());
    return {};
  }
  if (static_cast<int64_t>(draft.size()) > limit) draft.resize(static_cast<size_t>(limit));
  const int64_t n_vocab = model_.hparams().n_vocab;
  const auto bad =
      std::find_if(draft.begin(), draft.end(), [&](int32_t t) { return t < 0 || t >= n_vocab; });
  draft.erase(bad, draft.end());  // a token outside the vocabulary ends the guess
  if (!draft.empty() && !reserve(s, pending + static_cast<int64_t>(draft.size()))) draft.clear();
  return draft;
}

// ---- run --------------------------------------------------------------------------------

void Scheduler::run_batch(StepBatch& b) {
  std::vector<SequenceKv> kv;
  std::vector<float*> states;
  std::vector<int32_t> sequences, logit_rows;
  std::vector<int64_t> positions;
  for (const Part& p : b.parts) {
    Slot& s = *p.slot;
    const auto index = static_cast<int32_t>(kv.size());
    kv.push_back(s.seq.layers());
    states.push_back(s.state_buffer.data());
    for (int64_t i = 0; i < p.count; ++i) {
      sequences.push_back(index);
      positions.push_back(s.seq.length() + i);
    }
    if (p.wants_logits) {
      for (int64_t r = p.begin + p.count - p.drafted - 1; r < p.begin + p.count; ++r)
        logit_rows.push_back(static_cast<int32_t>(r));
    }
    if (p.drafted > 0 && recurrent_floats_ > 0) {
      model_.recurrent_state_read(s.state_buffer.data());
      s.before_step = s.state_buffer;
    }
  }
  // Reused across steps: 8 decode rows of a 152K vocabulary are 4.9 MB to zero-fill otherwise.
  logits_.resize(logit_rows.size() * static_cast<size_t>(model_.hparams().n_vocab));
  ForwardBatch batch;
  batch.tokens = b.feed;
  batch.sequences = sequences;
  batch.positions = positions;
  batch.logit_rows = logit_rows;
  if (recurrent_floats_ > 0) batch.recurrent = states;
  const bool drafter_reads_hidden = std::any_of(b.parts.begin(), b.parts.end(), [](const Part& p) {
    return p.slot->job.drafter && p.slot->job.drafter->wants_hidden();
  });
  if (drafter_reads_hidden) {
    STRATA_CHECK(model_.exports_hidden(), "a drafter reads hidden states this model does not give");
    hidden_.resize(b.feed.size() * static_cast<size_t>(model_.hparams().n_embd));
    batch.hidden = hidden_.data();
  }
  model_.forward(batch, kv, logits_.data(), pool_,
                 options_.record_experts ? &forward_stats_ : nullptr);
  if (options_.record_experts) {
    // Published before any job of this step finishes, so a finished job's tokens are counted.
    std::lock_guard lock(mutex_);
    expert_counts_ = forward_stats_.expert_counts;
    counted_tokens_ += static_cast<int64_t>(b.feed.size());
  }
}

// ---- accept -----------------------------------------------------------------------------

void Scheduler::accept_results(StepBatch& b) {
  for (const Part& p : b.parts) {
    Slot& s = *p.slot;
    if (s.state == Slot::State::prefill) {
      accept_prompt_chunk(s, p, b);
    } else {
      accept_decode(s, p, b);
    }
  }
}

void Scheduler::observe_hidden(Slot& s, const Part& p, const StepBatch& b, int64_t position,
                               int64_t rows) {
  if (!s.job.drafter || !s.job.drafter->wants_hidden() || rows <= 0) return;
  const int64_t d = model_.hparams().n_embd;
  // The drafter's own fault (a misshapen head) stops its drafts, not the generation.
  try {
    s.job.drafter->observe(
        position, std::span<const int32_t>(b.feed.data() + p.begin, static_cast<size_t>(rows)),
        hidden_.data() + p.begin * d);
  } catch (const std::exception& e) {
    log::warn("the drafter failed ({}); this generation drafts no more", e.what());
    s.job.drafter.reset();
  }
}

void Scheduler::accept_prompt_chunk(Slot& s, const Part& p, StepBatch& b) {
  observe_hidden(s, p, b, s.seq.length(), p.count);
  s.seq.set_length(s.seq.length() + p.count);
  s.tokens.insert(s.tokens.end(), b.feed.begin() + p.begin, b.feed.begin() + p.begin + p.count);
  s.prompt_done += static_cast<size_t>(p.count);
  if (!p.wants_logits) return;
  if (recurrent_floats_ > 0) {
    model_.recurrent_state_read(s.state_buffer.data());
    s.snapshot = s.state_buffer;  // the state after the whole prompt, for the next turn
    s.snapshot_position = s.seq.length();
  }
  s.state = Slot::State::decode;
  s.prefill_done = b.ran;
  s.result.prefill_seconds = seconds(b.ran - s.started);
  const int64_t n_vocab = model_.hparams().n_vocab;
  const std::span<float> logits(logits_.data() + b.row++ * n_vocab, static_cast<size_t>(n_vocab));
  int32_t token = -1;
  if (draw(s, logits, s.seq.length(), token)) s.pending.assign(1, token);
}

void Scheduler::accept_decode(Slot& s, const Part& p, StepBatch& b) {
  const int64_t length = s.seq.length();  // before this step
  const auto n_pending = static_cast<int64_t>(s.pending.size());
  const int64_t n_vocab = model_.hparams().n_vocab;
  const std::span<const int32_t> fed(b.feed.data() + p.begin, static_cast<size_t>(p.count));
  // Fed tokens that stay in the cache: the pending ones, then each drafted token drawn too.
  int64_t kept = n_pending;
  int32_t next = -1;  // the drawn token that runs next step (-1: the job ended)
  const size_t first_row = b.row;
  b.row += static_cast<size_t>(p.drafted + 1);
  s.result.drafted_tokens += p.drafted;
  count_stat(&SchedulerStats::drafted_tokens, p.drafted);
  for (int64_t i = 0; i <= p.drafted; ++i) {
    const std::span<float> logits(logits_.data() + (first_row + static_cast<size_t>(i)) * n_vocab,
                                  static_cast<size_t>(n_vocab));
    int32_t token = -1;
    if (!draw(s, logits, length + n_pending + i, token)) break;
    if (i < p.drafted && token == s.draft[static_cast<size_t>(i)]) {
      ++kept;
      ++s.result.accepted_tokens;
      count_stat(&SchedulerStats::accepted_tokens, 1);
      continue;
    }
    next = token;
    break;
  }
  s.draft.clear();
  const bool running = s.state == Slot::State::decode;  // draw may have finished the job
  if (kept < p.count && recurrent_floats_ > 0) {
    // The state went past the rejected tokens and cannot step back: restore the copy from
    // before the step; the kept tokens run again ahead of the next one.
    std::copy(s.before_step.begin(), s.before_step.end(), s.state_buffer.begin());
    model_.recurrent_state_written(s.state_buffer.data());
    s.pending.assign(fed.begin(), fed.begin() + kept);
  } else {
    if (running) observe_hidden(s, p, b, length, kept);
    s.seq.set_length(length + kept);
    s.tokens.insert(s.tokens.end(), fed.begin(), fed.begin() + kept);
    s.pending.clear();
  }
  if (running) {
    s.pending.push_back(next);
  } else {
    s.pending.clear();  // finish() left the cache as it was before the step; it now keeps `kept`
  }
}

bool Scheduler::draw(Slot& s, std::span<float> logits, int64_t position, int32_t& token) {
  if (s.job.constraint && !s.job.constraint->mask(logits)) {
    finish(s, FinishReason::error, "the output format allows no token to come next");
    return false;
  }
  token = s.sampler->sample(logits);
  const bool is_end = std::binary_search(s.job.end_tokens.begin(), s.job.end_tokens.end(), token);
  if (s.job.top_logprobs >= 0 && s.job.on_logprobs && !is_end)
    s.job.on_logprobs(s.sampler->logprobs(token, s.job.top_logprobs));
  s.sampler->accept(token);
  if (s.job.constraint) s.job.constraint->accept(token);
  if (is_end) {
    finish(s, FinishReason::stop);
    return false;
  }
  ++s.result.generated_tokens;
  count_stat(&SchedulerStats::generated_tokens, 1);
  if (s.job.on_token && !s.job.on_token(token)) {
    finish(s, FinishReason::stop);
    return false;
  }
  if (s.result.generated_tokens >= s.job.max_tokens || position + 1 > options_.n_ctx) {
    finish(s, FinishReason::length);
    return false;
  }
  return true;
}

}  // namespace strata
