#pragma once
// One persistent pool of worker threads for all compute. The calling thread takes part as
// thread 0, so a pool of N runs N-1 workers. Workers spin briefly between jobs (decode issues
// hundreds of small jobs per token; waking a sleeping thread costs tens of microseconds) and
// then sleep.
//
// A job waits only for the workers that joined it before its tasks ran out. A worker that is
// late (asleep, or its core given to another process or, in a VM, its virtual CPU descheduled
// by the host for milliseconds) finds the job closed and skips it, so the caller's thread does
// the work instead of waiting for it: on a 2-vCPU VM the first steps after an idle pause took
// 5 ms each, 30 times their time, waiting for the sleeping worker's vCPU to come back.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace strata {

class ThreadPool {
 public:
  // fn(task, thread): task in [0, n_tasks), thread in [0, size()).
  using TaskFn = std::function<void(int64_t task, int thread)>;

  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn for every task; tasks are handed out dynamically (an atomic counter), so uneven
  // tasks balance. Returns when all are done. Exceptions from tasks are rethrown here.
  void run(int64_t n_tasks, const TaskFn& fn);

  // Runs fn(thread) once on every thread of the pool.
  void run_on_all(const std::function<void(int thread)>& fn);

  // Pins the calling thread to the CPU the pool leaves for thread 0, where the workers are pinned
  // (one per allowed CPU; otherwise nothing). For a thread that only drives the pool (the
  // server's scheduler): left free, the OS may run it on a worker's CPU, where the two take
  // turns for every job. Not for a thread that starts other pools or threads afterwards: they
  // would inherit its single CPU.
  void pin_caller() const;

 private:
  void dispatch(int64_t n_tasks, const TaskFn& fn, bool per_thread);
  void wait_for_zero(const std::atomic<int>& count);
  void pin_workers();
  void worker_loop(int thread);
  void work_on_current_job(int thread);

  int n_threads_;
  int caller_cpu_ = -1;  // where pin_caller puts the calling thread (-1: workers not pinned)
  std::vector<std::thread> workers_;

  std::mutex mutex_;
  std::condition_variable wake_;
  // Bumped by 2 for every job; the low bit is set for run_on_all jobs (every thread runs them
  // once, and the caller waits for every worker), so a worker reads the kind with the job.
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};

  // The current job.
  const TaskFn* job_ = nullptr;
  int64_t n_tasks_ = 0;
  bool per_thread_ = false;  // run_on_all
  std::atomic<int64_t> next_task_{0};
  std::atomic<int> busy_workers_{0};    // run_on_all: workers yet to run it
  std::atomic<uint64_t> open_{0};       // run: the generation workers may still join (0: none)
  std::atomic<int> joined_workers_{0};  // run: workers inside the job (or checking whether open)
  std::exception_ptr error_;
  std::mutex error_mutex_;
};

// Splits [0, n) into `parts` nearly equal contiguous ranges; returns range `part`.
inline std::pair<int64_t, int64_t> split_range(int64_t n, int64_t parts, int64_t part) {
  const int64_t base = n / parts, extra = n % parts;
  const int64_t begin = part * base + std::min(part, extra);
  return {begin, begin + base + (part < extra ? 1 : 0)};
}

}  // namespace strata
