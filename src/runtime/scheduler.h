#pragma once
// Continuous batching: many generations share one model and one paged KV pool. Each step runs
// one forward over every running sequence's next token plus chunks of new prompts (so streams
// keep flowing while a long prompt is read), samples, and reports tokens through callbacks.
// A new prompt reuses the KV of the longest prefix any slot holds (finished conversations stay
// cached until their pages are needed): agents resend the whole conversation every turn.
// A job with a Drafter has its guesses checked in the same steps: a slot then feeds several
// tokens, keeps the drafted ones the model drew itself and rolls back the rest (the KV length,
// and a recurrent model's state).

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "model/model.h"
#include "runtime/kv_pool.h"
#include "runtime/sampler.h"
#include "runtime/speculative/answer_history.h"
#include "runtime/speculative/drafter.h"
#include "runtime/speculative/speculation.h"
#include "runtime/speculative/verify_cost.h"
#include "runtime/token_constraint.h"
#include "util/system_load.h"
#include "util/thread_pool.h"

namespace strata {

enum class FinishReason { stop, length, cancelled, error };
const char* finish_reason_name(FinishReason r);

struct JobResult {
  FinishReason reason = FinishReason::stop;
  std::string error;         // when reason == error
  bool device_lost = false;  // the error is the model's device being gone (DeviceLost)
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens whose KV was reused
  int64_t generated_tokens = 0;
  int64_t drafted_tokens = 0;   // draft tokens checked
  int64_t accepted_tokens = 0;  // of those, the ones the model drew too (kept)
  double queue_seconds = 0, prefill_seconds = 0, decode_seconds = 0;
  bool shared_steps = false;  // some of its steps also ran other jobs' tokens
};

struct GenerationJob {
  std::vector<int32_t> prompt;  // at least one token
  int64_t max_tokens = 1;       // > 0
  SamplingParams sampling;
  std::vector<int32_t> end_tokens;  // a generated end token finishes with `stop` (not reported)
  // Called on the scheduler thread with each generated token; return false to end the
  // generation there (stop string found, client gone): the job finishes with `stop`.
  std::function<bool(int32_t token)> on_token;
  // Which tokens may be drawn (structured output, enforced tool calls); null: any.
  std::shared_ptr<TokenConstraint> constraint;
  // With top_logprobs >= 0, on_logprobs gets each generated token's log-probability and its
  // top_logprobs likeliest alternatives (see Sampler::logprobs), just before on_token.
  int top_logprobs = -1;
  std::function<void(const TokenLogprobs&)> on_logprobs;
  // Speculative decoding: guesses of the next tokens, checked (at most max_draft a step) in the
  // step that runs the last drawn token. What is generated is the same with or without one.
  std::shared_ptr<Drafter> drafter;
  int64_t max_draft = 4;
  // Called exactly once, on the scheduler thread (or in submit/shutdown for jobs never run).
  std::function<void(const JobResult&)> on_done;
};

struct SchedulerOptions {
  int n_slots = 4;           // sequences generating at once
  int64_t n_ctx = 4096;      // positions one sequence may use
  int64_t kv_positions = 0;  // positions in the shared pool (0: n_ctx, shared by all slots)
  int64_t page_size = 64;    // positions per KV page
  GgmlType kv_type = GgmlType::F16;
  int64_t batch_tokens = 512;  // tokens per forward step (decode tokens + prompt chunks)
  // Prompt tokens per step while other streams are decoding: smaller chunks keep their tokens
  // flowing (a step's time grows with its tokens); alone, a prompt gets batch_tokens.
  int64_t prefill_chunk = 128;
  int64_t max_queue = 64;       // waiting jobs before submit refuses
  bool record_experts = false;  // count expert selections (see expert_counts)
  // Tokens of finished answers kept for n-gram drafts in later requests (AnswerHistory; 0: none).
  int64_t answer_history_tokens = 0;
  // Called on the scheduler thread after each job's on_done, with what other programs used of
  // the CPUs while it ran (sampled only when this is set): serve records lone CPU generations
  // for the planner (cli/run_record.h).
  std::function<void(const JobResult&, const SystemLoad&)> on_job_finished{};
};

struct SchedulerStats {
  int64_t slots_total = 0, slots_busy = 0, queue_depth = 0;
  int64_t kv_pages_total = 0, kv_page_size = 0;
  int64_t kv_bytes_per_position = 0;  // every KV layer's keys and values of one position
  int64_t recurrent_state_bytes = 0;  // the slots' recurrent states (hybrid models; 0 else)
  int64_t kv_pages_used = 0;          // held by any sequence
  int64_t kv_pages_active = 0;        // held by running generations (the rest is cached prefixes)
  uint64_t jobs_started = 0, jobs_finished = 0, prompt_tokens = 0, cached_prompt_tokens = 0,
           generated_tokens = 0, steps = 0, drafted_tokens = 0, accepted_tokens = 0;
  double busy_seconds = 0;  // time spent in forward steps
  std::string hold_reason;  // why queued requests wait (hold_new_work), empty when they do not
  bool draining = false;    // shutdown began: new jobs are refused, accepted ones finish
};

class Scheduler {
 public:
  Scheduler(Model& model, ThreadPool& pool, SchedulerOptions options);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Thread-safe. Returns the job id, or nullopt when the queue is full or the scheduler is
  // shutting down (on_done is then not called). Throws strata::Error for an invalid job, and
  // strata::DeviceLost once the model's device is gone (device_lost()).
  std::optional<uint64_t> submit(GenerationJob job);
  // Thread-safe; the job ends (cancelled) at the next step. Unknown ids are ignored.
  void cancel(uint64_t id);
  // Stops accepting jobs (drains): queued and running ones go on for up to `grace`, then the
  // rest are cancelled; returns when the worker has stopped.
  void shutdown(std::chrono::milliseconds grace);

  SchedulerStats stats() const;
  // Thread-safe. While `reason` is not empty, queued jobs wait (running ones go on), and the
  // stats say why; an empty reason lets them start again. (The server's temperature watchdog.)
  void hold_new_work(std::string reason);
  // Why the model can no longer run (its device was lost), or empty while it can.
  std::string device_lost() const;
  // Selections per (layer, expert), [n_layer * n_expert], when record_experts; and the tokens
  // they came from.
  std::vector<uint64_t> expert_counts(int64_t* tokens = nullptr) const;
  const SchedulerOptions& options() const { return options_; }
  // What checking drafts costs, measured on this scheduler's steps: for the drafters of its jobs
  // (CostAwareDrafter), which it calls on its own thread (the only thread to read it).
  const VerifyCostCurve* verify_cost() const { return &verify_cost_; }
  // What this scheduler's generations draft from: its verify-cost curve, acceptance tables and
  // earlier answers, and the model's MTP block where the model keeps one and gives the hidden
  // states it reads.
  DraftSources draft_sources();

 private:
  struct Slot;
  struct Queued {
    uint64_t id;
    GenerationJob job;
    std::chrono::steady_clock::time_point submitted;
  };

  // Where a slot can continue a prompt that shares `match` tokens with what it holds: the
  // position, and for hybrid models the recurrent state to continue from (null: start fresh).
  struct Resume {
    size_t position = 0;
    const std::vector<float>* state = nullptr;
  };
  Resume resume_point(const Slot& s, size_t match) const;

  void run();
  void admit(Queued q);

  // One step in three parts (scheduler_step.cpp): which tokens run (decode tokens and drafts
  // first, then prompt chunks), the forward over them, and what the logits mean for each slot.
  struct Part;
  struct StepBatch;
  bool step();
  StepBatch build_batch();
  void run_batch(StepBatch& batch);
  void accept_results(StepBatch& batch);
  std::vector<int32_t> propose_draft(Slot& s, int64_t budget);
  void accept_prompt_chunk(Slot& s, const Part& part, StepBatch& batch);
  // Tells the slot's drafter, when it reads hidden states, the first `rows` rows of its part:
  // kept positions from `position` on.
  void observe_hidden(Slot& s, const Part& part, const StepBatch& batch, int64_t position,
                      int64_t rows);
  void accept_decode(Slot& s, const Part& part, StepBatch& batch);
  // Draws slot s's token from `logits` and hands it to the job; false when the job ended there.
  // position: where the drawn token would run.
  bool draw(Slot& s, std::span<float> logits, int64_t position, int32_t& token);
  // Adds n to one of stats_'s counters (as it happens: a job's on_done sees its own tokens).
  void count_stat(uint64_t SchedulerStats::*counter, int64_t n);
  // Positions [length, length + n) of s made writable, evicting idle slots' caches if needed.
  bool reserve(Slot& s, int64_t n);
  bool make_room(int64_t pages_needed, const Slot* keep);
  void finish(Slot& slot, FinishReason reason, std::string error = {}, bool device_lost = false);
  void update_kv_stats();

  Model& model_;
  ThreadPool& pool_;
  SchedulerOptions options_;
  KvPool kv_;
  int64_t recurrent_floats_;  // per sequence, 0 for pure transformers
  std::vector<std::unique_ptr<Slot>> slots_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Queued> queue_;
  std::vector<uint64_t> cancelled_;
  uint64_t next_id_ = 1;
  bool accepting_ = true, stopping_ = false;
  std::string device_lost_;  // set once, under mutex_
  std::string hold_reason_;  // under mutex_ (hold_new_work)
  std::chrono::steady_clock::time_point deadline_;
  SchedulerStats stats_;        // counters (guarded by mutex_)
  ForwardStats forward_stats_;  // expert selections (worker thread; copied under mutex_)
  std::vector<uint64_t> expert_counts_;
  std::vector<float> logits_;     // the last step's logits (worker thread)
  std::vector<float> hidden_;     // its rows' hidden states, when a drafter reads them
  VerifyCostCurve verify_cost_;   // worker thread
  AcceptanceTables acceptance_;   // worker thread: how often its generations' drafts were kept
  AnswerHistory answer_history_;  // worker thread: finished answers, for later drafts
  int64_t counted_tokens_ = 0;
  std::thread worker_;
};

}  // namespace strata
