#pragma once
// Greedy generations for the scheduler tests (CPU and GPU models): a Session's continuation as
// the reference, and scheduler jobs that collect their tokens.

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

}  // namespace strata::test
