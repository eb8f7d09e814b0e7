// The continuous-batching scheduler against plain one-sequence generation: the same greedy tokens
// whether a prompt runs alone through a Session or batched with others, with prefix reuse, under
// page pressure; plus cancellation, limits and accounting.

#include "runtime/scheduler.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <limits>
#include <mutex>

#include "runtime/session.h"
#include "support/greedy_jobs.h"
#include "support/test_support.h"

namespace strata {
namespace {

using test::Collected;
using test::greedy_job;
using test::prompt_of;
using test::session_greedy;

std::unique_ptr<Model> tiny_model() {
  return Model::load((test::oracle_dir() / "models" / "tiny-qwen3moe-Q8_0.gguf").string());
}

TEST(Scheduler, ConcurrentGreedyGenerationsMatchSessions) {
  auto model = tiny_model();
  ThreadPool pool(2);
  const std::vector<std::vector<int32_t>> prompts = {prompt_of(1, 5), prompt_of(2, 40),
                                                     prompt_of(3, 130), prompt_of(4, 1)};
  std::vector<std::vector<int32_t>> expected;
  for (const auto& p : prompts) expected.push_back(session_greedy(*model, p, 12, pool));

  // Small pages and prompt chunks so prompts are split across steps and pages.
  Scheduler scheduler(*model, pool,
                      {.n_slots = 3,
                       .n_ctx = 256,
                       .kv_positions = 1024,
                       .page_size = 16,
                       .batch_tokens = 48,
                       .prefill_chunk = 16});
  std::vector<Collected> got(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i)
    ASSERT_TRUE(scheduler.submit(greedy_job(prompts[i], 12, got[i])));
  for (size_t i = 0; i < prompts.size(); ++i) {
    const JobResult r = got[i].done.get_future().get();
    EXPECT_EQ(r.reason, FinishReason::length);
    EXPECT_EQ(r.generated_tokens, 12);
    EXPECT_EQ(got[i].tokens, expected[i]) << "prompt " << i;
  }
  const SchedulerStats st = scheduler.stats();
  EXPECT_EQ(st.jobs_finished, prompts.size());
  EXPECT_EQ(st.slots_busy, 0);
}

TEST(Scheduler, PrefixReuseGivesTheSameTokens) {
  auto model = tiny_model();
  ThreadPool pool(2);
  const std::vector<int32_t> turn1 = prompt_of(7, 50);
  std::vector<int32_t> turn2 = turn1;  // the next turn: the conversation so far plus more
  for (int i = 0; i < 20; ++i) turn2.push_back(300 + i);
  const auto expected = session_greedy(*model, turn2, 8, pool);

  Scheduler scheduler(*model, pool, {.n_slots = 2, .n_ctx = 256, .page_size = 16});
  Collected a, b;
  ASSERT_TRUE(scheduler.submit(greedy_job(turn1, 4, a)));
  EXPECT_EQ(a.done.get_future().get().cached_tokens, 0);
  ASSERT_TRUE(scheduler.submit(greedy_job(turn2, 8, b)));
  const JobResult r = b.done.get_future().get();
  EXPECT_EQ(r.cached_tokens, 50);  // the whole first turn's prompt
  EXPECT_EQ(b.tokens, expected);
}

TEST(Scheduler, CancelEndsARunningJobAndFreesItsSlot) {
  auto model = tiny_model();
  ThreadPool pool(2);
  Scheduler scheduler(*model, pool, {.n_slots = 1, .n_ctx = 4096, .page_size = 16});
  std::promise<void> first_token;
  std::atomic<bool> signalled{false};
  std::promise<JobResult> done;
  GenerationJob job;
  job.prompt = prompt_of(9, 8);
  job.max_tokens = 4000;
  job.on_token = [&](int32_t) {
    if (!signalled.exchange(true)) first_token.set_value();
    return true;
  };
  job.on_done = [&](const JobResult& r) { done.set_value(r); };
  const auto id = scheduler.submit(std::move(job));
  ASSERT_TRUE(id);
  first_token.get_future().wait();
  scheduler.cancel(*id);
  const JobResult r = done.get_future().get();
  EXPECT_EQ(r.reason, FinishReason::cancelled);
  EXPECT_LT(r.generated_tokens, 4000);
  EXPECT_EQ(scheduler.stats().slots_busy, 0);
}

TEST(Scheduler, BoundedQueueRefusesWhenFull) {
  auto model = tiny_model();
  ThreadPool pool(1);
  Scheduler scheduler(*model, pool, {.n_slots = 1, .n_ctx = 4096, .max_queue = 1});
  std::promise<void> running;
  std::atomic<bool> signalled{false};
  std::promise<JobResult> long_done;
  GenerationJob long_job;
  long_job.prompt = prompt_of(2, 4);
  long_job.max_tokens = 4000;
  long_job.on_token = [&](int32_t) {
    if (!signalled.exchange(true)) running.set_value();
    return true;
  };
  long_job.on_done = [&](const JobResult& r) { long_done.set_value(r); };
  const auto id = scheduler.submit(std::move(long_job));
  ASSERT_TRUE(id);
  running.get_future().wait();  // the only slot is busy
  Collected queued, refused;
  ASSERT_TRUE(scheduler.submit(greedy_job(prompt_of(3, 4), 2, queued)));
  EXPECT_FALSE(scheduler.submit(greedy_job(prompt_of(4, 4), 2, refused)));
  scheduler.cancel(*id);
  EXPECT_EQ(long_done.get_future().get().reason, FinishReason::cancelled);
  EXPECT_EQ(queued.done.get_future().get().reason, FinishReason::length);
}

// Draining (serve's SIGTERM): nothing accepted is lost within the grace period; queued jobs run
// too, new ones are refused, and the stats say so.
TEST(Scheduler, ShutdownFinishesQueuedJobsWithinTheGrace) {
  auto model = tiny_model();
  ThreadPool pool(1);
  Scheduler scheduler(*model, pool, {.n_slots = 1, .n_ctx = 128, .max_queue = 4});
  scheduler.hold_new_work("test: keep them queued");
  Collected first, second, after;
  ASSERT_TRUE(scheduler.submit(greedy_job(prompt_of(1, 4), 3, first)));
  ASSERT_TRUE(scheduler.submit(greedy_job(prompt_of(2, 4), 3, second)));
  EXPECT_FALSE(scheduler.stats().draining);
  std::thread drain([&] { scheduler.shutdown(std::chrono::seconds(60)); });
  while (!scheduler.stats().draining) std::this_thread::yield();
  EXPECT_FALSE(scheduler.submit(greedy_job(prompt_of(3, 4), 3, after)));
  EXPECT_EQ(scheduler.stats().queue_depth, 2);
  scheduler.hold_new_work("");
  EXPECT_EQ(first.done.get_future().get().reason, FinishReason::length);
  EXPECT_EQ(second.done.get_future().get().reason, FinishReason::length);
  drain.join();  // returns as soon as the work is done, long before the grace ends
  EXPECT_EQ(scheduler.stats().jobs_finished, 2u);
}

// Past the grace, what is still queued or running is cancelled (its on_done still called).
TEST(Scheduler, ShutdownCancelsWhatTheGraceLeaves) {
  auto model = tiny_model();
  ThreadPool pool(1);
  Scheduler scheduler(*model, pool, {.n_slots = 1, .n_ctx = 128, .max_queue = 4});
  scheduler.hold_new_work("test: keep it queued");
  Collected queued;
  ASSERT_TRUE(scheduler.submit(greedy_job(prompt_of(1, 4), 3, queued)));
  scheduler.shutdown(std::chrono::milliseconds(50));
  EXPECT_EQ(queued.done.get_future().get().reason, FinishReason::cancelled);
}

TEST(Scheduler, RefusesInvalidJobs) {
  auto model = tiny_model();
  ThreadPool pool(1);
  Scheduler scheduler(*model, pool, {.n_slots = 1, .n_ctx = 64, .max_queue = 1});
  Collected c;
  EXPECT_ANY_THROW(scheduler.submit(greedy_job({}, 4, c)));                 // no prompt
  EXPECT_ANY_THROW(scheduler.submit(greedy_job(prompt_of(1, 60), 10, c)));  // context
  EXPECT_ANY_THROW(scheduler.submit(greedy_job({100000}, 4, c)));           // vocabulary
  GenerationJob bad = greedy_job(prompt_of(1, 4), 4, c);
  bad.sampling.top_p = 0;
  EXPECT_ANY_THROW(scheduler.submit(std::move(bad)));
  // Shutdown: queued work is dropped with `cancelled`, nothing is accepted afterwards.
  scheduler.shutdown(std::chrono::milliseconds(0));
  Collected after;
  EXPECT_FALSE(scheduler.submit(greedy_job(prompt_of(1, 4), 4, after)));
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

TEST(Scheduler, RecordsExpertSelectionsOfEveryToken) {
  auto model = tiny_model();
  const ModelHParams& hp = model->hparams();
  ThreadPool pool(2);
  Scheduler scheduler(*model, pool, {.n_slots = 2, .n_ctx = 128, .record_experts = true});
  Collected a, b;
  ASSERT_TRUE(scheduler.submit(greedy_job(prompt_of(1, 20), 5, a)));
  ASSERT_TRUE(scheduler.submit(greedy_job(prompt_of(2, 9), 3, b)));
  a.done.get_future().wait();
  b.done.get_future().wait();
  int64_t tokens = 0;
  const auto counts = scheduler.expert_counts(&tokens);
  // Every prompt token and every generated token but the last ran through the model.
  EXPECT_EQ(tokens, (20 + 4) + (9 + 2));
  ASSERT_EQ(static_cast<int64_t>(counts.size()), hp.n_layer * hp.n_expert);
  for (int64_t l = 0; l < hp.n_layer; ++l) {
    uint64_t sum = 0;
    for (int64_t e = 0; e < hp.n_expert; ++e) sum += counts[l * hp.n_expert + e];
    EXPECT_EQ(sum, static_cast<uint64_t>(tokens * hp.n_expert_used)) << "layer " << l;
  }
}

// What serve records for the planner (issue 40): a job whose steps ran nothing else says so, as
// do jobs that shared steps; the finished-job hook sees each result with the machine's load.
TEST(Scheduler, TellsLoneJobsFromBatchedOnesAndReportsEachFinishedJob) {
  auto model = tiny_model();
  ThreadPool pool(2);
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::pair<JobResult, SystemLoad>> finished;
  SchedulerOptions options{.n_slots = 2, .n_ctx = 128};
  options.on_job_finished = [&](const JobResult& r, const SystemLoad& load) {
    std::lock_guard lock(mutex);
    finished.emplace_back(r, load);
    changed.notify_all();
  };
  Scheduler scheduler(*model, pool, options);
  const auto wait_for = [&](size_t n) {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return finished.size() >= n; });
  };

  Collected alone;
  ASSERT_TRUE(scheduler.submit(greedy_job(prompt_of(1, 20), 6, alone)));
  const JobResult r = alone.done.get_future().get();
  EXPECT_FALSE(r.shared_steps);
  wait_for(1);
  EXPECT_EQ(finished[0].first.generated_tokens, 6);
  EXPECT_FALSE(finished[0].first.shared_steps);
#ifdef __linux__
  EXPECT_TRUE(finished[0].second.known);  // sampled from /proc around the job
#endif

  // Held, then released: both start in the same step.
  scheduler.hold_new_work("test");
  Collected a, b;
  ASSERT_TRUE(scheduler.submit(greedy_job(prompt_of(2, 12), 6, a)));
  ASSERT_TRUE(scheduler.submit(greedy_job(prompt_of(3, 9), 6, b)));
  scheduler.hold_new_work("");
  EXPECT_TRUE(a.done.get_future().get().shared_steps);
  EXPECT_TRUE(b.done.get_future().get().shared_steps);
  wait_for(3);
  EXPECT_TRUE(finished[1].first.shared_steps && finished[2].first.shared_steps);
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// Hybrid (Gated DeltaNet) models: a recurrent state per slot, snapshots for prefix reuse.
std::unique_ptr<Model> tiny_hybrid() {
  return Model::load((test::oracle_dir() / "gdn" / "models" / "tiny-qwen35moe-Q8_0.gguf").string());
}

TEST(Scheduler, HybridModelGenerationsMatchSessions) {
  auto model = tiny_hybrid();
  ThreadPool pool(2);
  test::expect_batched_generations_match_sessions(*model, pool);
}

TEST(Scheduler, HybridPrefixReuseResumesFromSnapshotOrLiveState) {
  auto model = tiny_hybrid();
  ThreadPool pool(2);
  Scheduler scheduler(*model, pool, {.n_slots = 1, .n_ctx = 256, .page_size = 16});
  const std::vector<int32_t> first = prompt_of(8, 50);
  Collected a;
  ASSERT_TRUE(scheduler.submit(greedy_job(first, 4, a)));
  a.done.get_future().wait();

  // Same start, different continuation: the state after `first` is a snapshot (the slot went on
  // generating), so 50 tokens are reused.
  std::vector<int32_t> second = first;
  for (int i = 0; i < 20; ++i) second.push_back(400 + i);
  Collected b;
  ASSERT_TRUE(scheduler.submit(greedy_job(second, 6, b)));
  EXPECT_EQ(b.done.get_future().get().cached_tokens, 50);
  EXPECT_EQ(b.tokens, session_greedy(*model, second, 6, pool));

  // The next turn carries everything the slot ran (prompt + generated but the last): the live
  // state continues it.
  std::vector<int32_t> third = second;
  third.insert(third.end(), b.tokens.begin(), b.tokens.end() - 1);
  for (int i = 0; i < 5; ++i) third.push_back(300 + i);
  Collected c;
  ASSERT_TRUE(scheduler.submit(greedy_job(third, 6, c)));
  EXPECT_EQ(c.done.get_future().get().cached_tokens,
            static_cast<int64_t>(second.size() + b.tokens.size() - 1));
  EXPECT_EQ(c.tokens, session_greedy(*model, third, 6, pool));

  // A prompt sharing only a few tokens with no state to resume from starts over.
  std::vector<int32_t> other(first.begin(), first.begin() + 10);
  other.push_back(7);
  Collected d;
  ASSERT_TRUE(scheduler.submit(greedy_job(other, 3, d)));
  EXPECT_EQ(d.done.get_future().get().cached_tokens, 0);
  EXPECT_EQ(d.tokens, session_greedy(*model, other, 3, pool));
}

// A constraint that allows one token per step, walking through `allowed`; it counts what it saw.
class ScriptedConstraint : public TokenConstraint {
 public:
  explicit ScriptedConstraint(std::vector<int32_t> allowed) : allowed_(std::move(allowed)) {}
  bool mask(std::span<float> logits) override {
    ++masks;
    if (next_ >= allowed_.size()) return false;
    for (size_t i = 0; i < logits.size(); ++i) {
      if (static_cast<int32_t>(i) != allowed_[next_])
        logits[i] = -std::numeric_limits<float>::infinity();
    }
    return true;
  }
  void accept(int32_t token) override {
    accepted.push_back(token);
    ++next_;
  }
  int masks = 0;
  std::vector<int32_t> accepted;

 private:
  std::vector<int32_t> allowed_;
  size_t next_ = 0;
};

TEST(Scheduler, ConstraintMasksEveryDrawAndLogprobsFollowTheMask) {
  auto model = tiny_model();
  ThreadPool pool(2);
  Scheduler scheduler(*model, pool, {.n_slots = 2, .n_ctx = 256, .page_size = 16});
  const std::vector<int32_t> script = {5, 77, 300, 5};
  auto constraint = std::make_shared<ScriptedConstraint>(script);
  Collected c, free_run;
  GenerationJob job = greedy_job(prompt_of(3, 20), 4, c);
  job.sampling.temperature = 0.7f;  // a draw, not greedy: still only the allowed token
  job.constraint = constraint;
  job.top_logprobs = 2;
  std::vector<TokenLogprobs> logprobs;
  job.on_logprobs = [&](const TokenLogprobs& lp) { logprobs.push_back(lp); };
  ASSERT_TRUE(scheduler.submit(std::move(job)));
  // A job without a constraint next to it is not affected.
  ASSERT_TRUE(scheduler.submit(greedy_job(prompt_of(3, 20), 4, free_run)));
  EXPECT_EQ(c.done.get_future().get().reason, FinishReason::length);
  EXPECT_EQ(free_run.done.get_future().get().reason, FinishReason::length);
  EXPECT_EQ(c.tokens, script);
  EXPECT_EQ(constraint->accepted, script);
  EXPECT_EQ(free_run.tokens, session_greedy(*model, prompt_of(3, 20), 4, pool));
  ASSERT_EQ(logprobs.size(), script.size());
  for (size_t i = 0; i < script.size(); ++i) {
    EXPECT_EQ(logprobs[i].chosen.token, script[i]);
    EXPECT_EQ(logprobs[i].chosen.logprob, 0.0f);  // the only token left
    ASSERT_EQ(logprobs[i].top.size(), 2u);
    EXPECT_EQ(logprobs[i].top[0].token, script[i]);
    EXPECT_EQ(logprobs[i].top[1].logprob, -9999.0f);
  }
}

TEST(Scheduler, ConstraintWithNoTokenLeftEndsTheJobWithAnError) {
  auto model = tiny_model();
  ThreadPool pool(2);
  Scheduler scheduler(*model, pool, {.n_slots = 1, .n_ctx = 256, .page_size = 16});
  Collected c;
  GenerationJob job = greedy_job(prompt_of(4, 10), 8, c);
  job.constraint = std::make_shared<ScriptedConstraint>(std::vector<int32_t>{9, 10});
  ASSERT_TRUE(scheduler.submit(std::move(job)));
  const JobResult r = c.done.get_future().get();
  EXPECT_EQ(r.reason, FinishReason::error);
  EXPECT_NE(r.error.find("allows no token"), std::string::npos) << r.error;
  EXPECT_EQ(c.tokens, (std::vector<int32_t>{9, 10}));
}

}  // namespace
}  // namespace strata
