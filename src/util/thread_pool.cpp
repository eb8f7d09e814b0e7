#include "util/thread_pool.h"

#include <immintrin.h>

#include <pthread.h>
#include <sched.h>

#include <chrono>
#include <system_error>

#include "util/error.h"

namespace strata {
namespace {

constexpr auto kSpinTime = std::chrono::microseconds(200);

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads) {
  STRATA_CHECK(n_threads >= 1 && n_threads <= 1024, "thread count must be 1..1024, got {}",
               n_threads);
  workers_.reserve(static_cast<size_t>(n_threads - 1));
  try {
    for (int t = 1; t < n_threads; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
  } catch (const std::system_error& e) {
    // Stop and join the workers already started, then report (a joinable thread left in
    // workers_ would terminate the process).
    {
      std::lock_guard lock(mutex_);
      stop_.store(true);
      generation_.fetch_add(2);  // stop_ is read before the kind bit
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
    fail("cannot start {} threads: {} (try fewer with -t)", n_threads, e.what());
  }
  pin_workers();
}

void ThreadPool::pin_workers() {
  // One worker per allowed CPU keeps each thread's caches warm across steps. Only when there
  // are at least as many allowed CPUs as threads; otherwise the scheduler knows better.
  cpu_set_t allowed;
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  if (static_cast<int>(cpus.size()) < n_threads_ || n_threads_ == 1) return;
  caller_cpu_ = cpus[0];
  for (int t = 1; t < n_threads_; ++t) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[static_cast<size_t>(t)], &one);
    ::pthread_setaffinity_np(workers_[static_cast<size_t>(t - 1)].native_handle(), sizeof one,
                             &one);
  }
}

void ThreadPool::pin_caller() const {
  if (caller_cpu_ < 0) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(caller_cpu_, &one);
  ::pthread_setaffinity_np(::pthread_self(), sizeof one, &one);
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_.store(true);
    generation_.fetch_add(2);  // stop_ is read before the kind bit
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::work_on_current_job(int thread) {
  if (per_thread_) {
    try {
      (*job_)(thread, thread);
    } catch (...) {
      std::lock_guard lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
    return;
  }
  for (;;) {
    const int64_t task = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (task >= n_tasks_) break;
    try {
      (*job_)(task, thread);
    } catch (...) {
      std::lock_guard lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
      next_task_.store(n_tasks_, std::memory_order_relaxed);  // abandon the rest
    }
  }
}

void ThreadPool::worker_loop(int thread) {
  uint64_t seen = 0;
  for (;;) {
    // Spin for a short while waiting for the next job, then sleep.
    const auto spin_until = std::chrono::steady_clock::now() + kSpinTime;
    while (generation_.load(std::memory_order_acquire) == seen &&
           std::chrono::steady_clock::now() < spin_until) {
      _mm_pause();
    }
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    if (seen & 1) {  // run_on_all: the caller waits for this thread
      work_on_current_job(thread);
      busy_workers_.fetch_sub(1, std::memory_order_acq_rel);
      continue;
    }
    // Join only a job still open. Against the caller's close (open_ = 0, then joined_workers_
    // read; all sequentially consistent): either it sees this worker joined and waits, or this
    // worker sees the job closed and leaves it alone (its fields may already be the next job's).
    joined_workers_.fetch_add(1, std::memory_order_seq_cst);
    if (open_.load(std::memory_order_seq_cst) == seen) work_on_current_job(thread);
    joined_workers_.fetch_sub(1, std::memory_order_release);
  }
}

void ThreadPool::run(int64_t n_tasks, const TaskFn& fn) {
  if (n_tasks <= 0) return;
  if (n_threads_ == 1 || n_tasks == 1) {
    for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
    return;
  }
  dispatch(n_tasks, fn, false);
}

void ThreadPool::wait_for_zero(const std::atomic<int>& count) {
  // Yield now and then so an oversubscribed machine (more threads than free cores) lets a
  // descheduled worker finish instead of spinning against it.
  for (int spins = 0; count.load(std::memory_order_seq_cst) != 0; ++spins) {
    if (spins < 4096) {
      _mm_pause();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::dispatch(int64_t n_tasks, const TaskFn& fn, bool per_thread) {
  job_ = &fn;
  per_thread_ = per_thread;
  n_tasks_ = n_tasks;
  next_task_.store(0, std::memory_order_relaxed);
  error_ = nullptr;
  const uint64_t generation =
      ((generation_.load(std::memory_order_relaxed) >> 1) + 1) << 1 | (per_thread ? 1 : 0);
  if (per_thread) {
    busy_workers_.store(n_threads_ - 1, std::memory_order_relaxed);
  } else {
    open_.store(generation, std::memory_order_relaxed);  // published by the release below
  }
  {
    std::lock_guard lock(mutex_);
    generation_.store(generation, std::memory_order_release);
  }
  wake_.notify_all();
  work_on_current_job(0);
  if (per_thread) {
    wait_for_zero(busy_workers_);
  } else {
    // No task is left to claim: close the job and wait only for the workers inside it.
    open_.store(0, std::memory_order_seq_cst);
    wait_for_zero(joined_workers_);
  }
  job_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::run_on_all(const std::function<void(int thread)>& fn) {
  const TaskFn task = [&](int64_t, int thread) { fn(thread); };
  if (n_threads_ == 1) {
    fn(0);
    return;
  }
  dispatch(n_threads_, task, true);
}

}  // namespace strata
