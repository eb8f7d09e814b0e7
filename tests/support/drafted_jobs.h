#pragma once
// Drafted generations for the draft-verification tests (CPU and GPU models): a generation with
// and without a scripted drafter, and drafts that are right, wrong or partly right.

#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <vector>

#include "runtime/scheduler.h"
#include "runtime/speculative/drafter.h"
#include "support/greedy_jobs.h"

namespace strata::test {

struct Generation {
  std::vector<int32_t> tokens;
  JobResult result;
  uint64_t steps = 0;  // the scheduler's steps for it (run alone)
};

// `prompt` through a fresh one-slot scheduler, with `drafter` when given.
inline Generation generate(Model& model, ThreadPool& pool, const std::vector<int32_t>& prompt,
                           int n, std::shared_ptr<Drafter> drafter = nullptr,
                           SamplingParams sampling = {}) {
  Scheduler scheduler(model, pool, {.n_slots = 1, .n_ctx = 256, .page_size = 16});
  Collected c;
  GenerationJob job = greedy_job(prompt, n, c);
  job.sampling = sampling;
  job.drafter = std::move(drafter);
  EXPECT_TRUE(scheduler.submit(std::move(job)));
  Generation g;
  g.result = c.done.get_future().get();
  g.tokens = c.tokens;
  g.steps = scheduler.stats().steps;
  return g;
}

// The reference with every token changed: a draft the model never draws.
inline std::vector<int32_t> wrong(const std::vector<int32_t>& tokens, int64_t n_vocab) {
  std::vector<int32_t> out;
  for (int32_t t : tokens) out.push_back(static_cast<int32_t>((t + 1) % n_vocab));
  return out;
}

// Every third token wrong: drafts of 4 keep one to three tokens.
inline std::vector<int32_t> partly_right(const std::vector<int32_t>& tokens, int64_t n_vocab) {
  std::vector<int32_t> out = tokens;
  for (size_t i = 2; i < out.size(); i += 3) out[i] = static_cast<int32_t>((out[i] + 1) % n_vocab);
  return out;
}

inline std::shared_ptr<Drafter> scripted(const std::vector<int32_t>& prompt,
                                         std::vector<int32_t> continuation) {
  return std::make_shared<ScriptedDrafter>(prompt.size(), std::move(continuation));
}

inline void expect_drafts_change_nothing(Model& model, SamplingParams sampling = {}) {
  ThreadPool pool(2);
  const int64_t n_vocab = model.hparams().n_vocab;
  const int n = 16;
  for (const std::vector<int32_t>& prompt : {prompt_of(11, 21), prompt_of(12, 6)}) {
    const Generation plain = generate(model, pool, prompt, n, nullptr, sampling);
    ASSERT_EQ(plain.tokens.size(), static_cast<size_t>(n));

    const Generation right =
        generate(model, pool, prompt, n, scripted(prompt, plain.tokens), sampling);
    EXPECT_EQ(right.tokens, plain.tokens) << "right drafts";
    EXPECT_GT(right.result.drafted_tokens, 0);
    EXPECT_EQ(right.result.accepted_tokens, right.result.drafted_tokens);
    // Drafts of 4: five tokens a step instead of one.
    EXPECT_LE(right.steps + 8, plain.steps) << right.steps << " steps vs " << plain.steps;

    const Generation rejected =
        generate(model, pool, prompt, n, scripted(prompt, wrong(plain.tokens, n_vocab)), sampling);
    EXPECT_EQ(rejected.tokens, plain.tokens) << "wrong drafts";
    EXPECT_GT(rejected.result.drafted_tokens, 0);
    EXPECT_EQ(rejected.result.accepted_tokens, 0);
    EXPECT_EQ(rejected.steps, plain.steps);

    const Generation partial = generate(
        model, pool, prompt, n, scripted(prompt, partly_right(plain.tokens, n_vocab)), sampling);
    EXPECT_EQ(partial.tokens, plain.tokens) << "partly right drafts";
    EXPECT_GT(partial.result.accepted_tokens, 0);
    EXPECT_LT(partial.result.accepted_tokens, partial.result.drafted_tokens);
    EXPECT_LT(partial.steps, plain.steps);
    EXPECT_EQ(partial.result.generated_tokens, n);
  }
}

}  // namespace strata::test
