#pragma once
// The scheduler's per-sequence state, shared by scheduler.cpp (admission, finishing) and
// scheduler_step.cpp (the steps). Private to the runtime.

#include <chrono>
#include <optional>
#include <vector>

#include "runtime/kv_pool.h"
#include "runtime/sampler.h"
#include "runtime/scheduler.h"

namespace strata {

using Clock = std::chrono::steady_clock;

inline double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

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
  // Hybrid models: the state before a step that checks a draft, restored when part of the draft
  // is rejected (the step advanced the state over every drafted token).
  std::vector<float> before_step;

  // The running job.
  uint64_t id = 0;
  GenerationJob job;
  std::optional<Sampler> sampler;
  size_t prompt_done = 0;  // prompt tokens in the cache
  // Decode state: drawn tokens not yet in the cache. One (the last drawn) after most steps; after
  // a hybrid model's rollback also the kept draft tokens before it, which the next step re-runs.
  std::vector<int32_t> pending;
  std::vector<int32_t> draft;  // this step's draft, fed after `pending`
  JobResult result;
  Clock::time_point started{}, prefill_done{};
  CpuTimeSample cpu_at_start;  // when on_job_finished is set
};

}  // namespace strata
