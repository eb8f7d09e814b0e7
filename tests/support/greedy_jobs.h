#pragma once
// Greedy generations for the scheduler tests (CPU and GPU models): a Session's continuation as
// the reference, and scheduler jobs that collect their tokens.

#include <gtest/gtest.h>

#include <future>
#include <span>
#include <vector>

#include "runtime/sampler.h"
#include "runtime/scheduler.h"
#include "runtime/session.h"

namespace strata::test {

// Greedy continuation of `prompt` by a Session (the reference).
inline std::vector<int32_t> session_greedy(Model& model, const std::vector<int32_t>& prompt, int n,
                                           ThreadPool& pool) {
  Session session(model, 512, GgmlType::F16, pool);
  std::vector<float> logits;
  session.eval(prompt, false, logits);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(argmax(logits));
    session.eval(std::span<const int32_t>(&out.back(), 1), false, logits);
  }
  return out;
}

struct Collected {
  std::vector<int32_t> tokens;
  std::promise<JobResult> done;
};

// A greedy job of n tokens whose tokens and result land in `c`.
inline GenerationJob greedy_job(const std::vector<int32_t>& prompt, int n, Collected& c) {
  GenerationJob job;
  job.prompt = prompt;
  job.max_tokens = n;
  job.on_token = [&c](int32_t t) {
    c.tokens.push_back(t);
    return true;
  };
  job.on_done = [&c](const JobResult& r) { c.done.set_value(r); };
  return job;
}

// A made-up prompt of n tokens (ids 1..500) that differs with the seed.
inline std::vector<int32_t> prompt_of(int seed, int n) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back((seed * 37 + i * 11) % 500 + 1);
  return p;
}

// Three prompts through the scheduler's continuous batches (two slots, a paged pool, prompts split
// over steps next to the other slot's decode tokens) each generate what a Session generates
// alone.
inline void expect_batched_generations_match_sessions(Model& model, ThreadPool& pool) {
  const std::vector<std::vector<int32_t>> prompts = {prompt_of(5, 70), prompt_of(6, 3),
                                                     prompt_of(7, 33)};
  std::vector<std::vector<int32_t>> expected;
  for (const auto& p : prompts) expected.push_back(session_greedy(model, p, 10, pool));
  Scheduler scheduler(
      model, pool,
      {.n_slots = 2, .n_ctx = 256, .page_size = 16, .batch_tokens = 40, .prefill_chunk = 24});
  std::vector<Collected> got(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i)
    ASSERT_TRUE(scheduler.submit(greedy_job(prompts[i], 10, got[i])));
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(got[i].done.get_future().get().reason, FinishReason::length);
    EXPECT_EQ(got[i].tokens, expected[i]) << "prompt " << i;
  }
}

}  // namespace strata::test
