#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <stdexcept>

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

TEST(ThreadPool, RejectsBadSize) {
  EXPECT_ANY_THROW(ThreadPool(0));
}

}  // namespace
}  // namespace strata
