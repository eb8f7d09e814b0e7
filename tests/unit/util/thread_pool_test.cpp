#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <pthread.h>
#include <semaphore.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace strata {
namespace {

TEST(ThreadPool, EveryTaskRunsExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.run(n, [&](int64_t task, int thread) {
        ASSERT_GE(thread, 0);
        ASSERT_LT(thread, threads);
        hits[static_cast<size_t>(task)]++;
      });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1) << "threads=" << threads << " n=" << n;
    }
  }
}

TEST(ThreadPool, ManySmallJobsInARow) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  for (int job = 0; job < 2000; ++job) {
    pool.run(4, [&](int64_t task, int) { sum += task; });
  }
  EXPECT_EQ(sum.load(), 2000 * 6);
}

TEST(ThreadPool, RunOnAllReachesEveryThreadOnce) {
  ThreadPool pool(5);
  for (int round = 0; round < 100; ++round) {
    std::vector<std::atomic<int>> seen(5);
    pool.run_on_all([&](int thread) { seen[static_cast<size_t>(thread)]++; });
    for (auto& s : seen) ASSERT_EQ(s.load(), 1);
  }
}

TEST(ThreadPool, ExceptionsReachTheCaller) {
  ThreadPool pool(3);
  EXPECT_THROW(pool.run(100,
                        [](int64_t task, int) {
                          if (task == 37) throw std::runtime_error("task 37 failed");
                        }),
               std::runtime_error);
  // The pool stays usable.
  std::atomic<int> count{0};
  pool.run(10, [&](int64_t, int) { count++; });
  EXPECT_EQ(count.load(), 10);
}

sem_t held_up, let_go;  // for the signal handler: a worker it holds up
void hold_up(int) {
  sem_post(&held_up);
  while (sem_wait(&let_go) != 0) {
  }
}

// A worker that does not come (here: held inside a signal handler; in life: asleep, or its
// virtual CPU descheduled by the host) does not hold up the jobs meanwhile: the caller's thread
// runs their tasks. Once back, the worker takes part again and every task still runs once.
TEST(ThreadPool, AWorkerThatDoesNotComeDoesNotHoldUpTheJobs) {
  using namespace std::chrono_literals;
  ThreadPool pool(2);
  pthread_t worker{};
  pool.run_on_all([&](int thread) {
    if (thread == 1) worker = pthread_self();
  });
  ASSERT_EQ(sem_init(&held_up, 0, 0), 0);
  ASSERT_EQ(sem_init(&let_go, 0, 0), 0);
  struct sigaction hold {
  }, before{};
  hold.sa_handler = hold_up;
  sigemptyset(&hold.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR1, &hold, &before), 0);
  ASSERT_EQ(pthread_kill(worker, SIGUSR1), 0);
  while (sem_wait(&held_up) != 0) {
  }

  constexpr int kJobs = 20, kTasks = 50;
  std::vector<int> ran_by(kJobs * kTasks, -1);
  std::atomic<bool> done{false};
  std::thread caller([&] {
    for (int job = 0; job < kJobs; ++job) {
      pool.run(kTasks, [&](int64_t task, int thread) {
        ran_by[static_cast<size_t>(job * kTasks + task)] = thread;
      });
    }
    done = true;
  });
  const auto start = std::chrono::steady_clock::now();
  while (!done && std::chrono::steady_clock::now() - start < 10s) std::this_thread::sleep_for(1ms);
  const bool finished_without_it = done;
  sem_post(&let_go);  // either way, so the jobs can end
  caller.join();
  sigaction(SIGUSR1, &before, nullptr);
  EXPECT_TRUE(finished_without_it) << "the jobs waited for the held-up worker";
  for (int thread : ran_by) EXPECT_EQ(thread, 0);

  std::vector<std::atomic<int>> hits(2000);
  std::atomic<bool> worker_ran{false};
  for (int job = 0; job < 200; ++job) {
    pool.run(10, [&](int64_t task, int thread) {
      hits[static_cast<size_t>(job * 10 + task)]++;
      if (thread == 1) worker_ran = true;
      if (thread == 1 || worker_ran) return;
      std::this_thread::sleep_for(10us);  // leave the worker tasks to take
    });
  }
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  EXPECT_TRUE(worker_ran) << "the worker never took part again";
  sem_destroy(&held_up);
  sem_destroy(&let_go);
}

TEST(ThreadPool, SplitRangeCoversEverythingOnce) {
  for (int64_t n : {0, 1, 5, 100, 101}) {
    for (int64_t parts : {1, 2, 3, 7}) {
      int64_t expected_begin = 0;
      for (int64_t p = 0; p < parts; ++p) {
        const auto [b, e] = split_range(n, parts, p);
        EXPECT_EQ(b, expected_begin);
        EXPECT_GE(e, b);
        EXPECT_LE(e - b, n / parts + 1);
        expected_begin = e;
      }
      EXPECT_EQ(expected_begin, n);
    }
  }
}

// pin_caller puts the calling thread on the first allowed CPU where the workers are pinned (as
// many CPUs as threads) and leaves it where they are not (more threads than CPUs). Each call runs
// in a thread of its own, so the test's thread keeps its CPUs.
TEST(ThreadPool, PinCallerTakesTheCpuLeftForThreadZero) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  const int n_cpus = CPU_COUNT(&allowed);
  int first = 0;
  while (!CPU_ISSET(first, &allowed)) ++first;
  const auto affinity_after_pin = [](const ThreadPool& pool) {
    cpu_set_t got;
    CPU_ZERO(&got);
    std::thread([&] {
      pool.pin_caller();
      sched_getaffinity(0, sizeof got, &got);
    }).join();
    return got;
  };
  if (n_cpus >= 2) {
    ThreadPool pool(2);
    const cpu_set_t got = affinity_after_pin(pool);
    EXPECT_EQ(CPU_COUNT(&got), 1);
    EXPECT_TRUE(CPU_ISSET(first, &got));
  }
  ThreadPool crowded(n_cpus + 1);
  const cpu_set_t got = affinity_after_pin(crowded);
  EXPECT_EQ(CPU_COUNT(&got), n_cpus);
}

TEST(ThreadPool, RejectsBadSize) {
  EXPECT_ANY_THROW(ThreadPool(0));
}

}  // namespace
}  // namespace strata
