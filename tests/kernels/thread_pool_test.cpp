// ThreadPool (src/base/thread_pool.*), the pool every CPU kernel runs on: every task runs
// exactly once per job, thread ids stay in range, jobs never overlap, and many back-to-back
// tiny jobs (the decode pattern) complete even with more threads than cores.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "base/thread_pool.h"

namespace loom {
namespace {

TEST(ThreadPool, EveryTaskRunsOnceWithValidThreadIds) {
  for (int n_threads : {1, 2, 3, 5}) {
    ThreadPool pool(n_threads);
    ASSERT_EQ(pool.size(), n_threads);
    for (int64_t n : {1, 2, 3, 7, 64, 1000}) {
      for (int rep = 0; rep < 20; ++rep) {
        std::vector<std::atomic<int>> hits(n);
        std::atomic<int> bad_thread{0};
        pool.parallel_for(n, [&](int64_t i, int t) {
          hits[i].fetch_add(1);
          if (t < 0 || t >= n_threads) bad_thread.fetch_add(1);
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << n_threads << " " << n;
        ASSERT_EQ(bad_thread.load(), 0);
      }
    }
  }
}

TEST(ThreadPool, ManyTinyJobsDoNotOverlapOrLoseTasks) {
  // More threads than this machine may have cores: workers get descheduled mid-job, which
  // must neither lose tasks nor let a task of job k run after job k returned.
  ThreadPool pool(4);
  std::atomic<int64_t> in_job{0};
  int64_t total = 0;
  for (int job = 0; job < 20000; ++job) {
    const int64_t n = 1 + job % 5;
    std::atomic<int64_t> count{0};
    pool.parallel_for(n, [&](int64_t, int) {
      in_job.fetch_add(1);
      count.fetch_add(1);
      in_job.fetch_sub(1);
    });
    ASSERT_EQ(in_job.load(), 0) << "a task still running after parallel_for returned";
    ASSERT_EQ(count.load(), n);
    total += n;
  }
  EXPECT_GT(total, 0);
}

TEST(ThreadPool, WaitsForASlowClaimedTask) {
  ThreadPool pool(2);
  std::atomic<bool> slow_done{false};
  pool.parallel_for(8, [&](int64_t i, int) {
    if (i == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      slow_done.store(true);
    }
  });
  EXPECT_TRUE(slow_done.load());
}

TEST(ThreadPool, SleepingWorkersWakeForLaterJobs) {
  ThreadPool pool(3);
  for (int round = 0; round < 3; ++round) {
    // Long enough for workers to give up spinning and sleep.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::atomic<int> count{0};
    pool.parallel_for(100, [&](int64_t, int) { count.fetch_add(1); });
    EXPECT_EQ(count.load(), 100);
  }
}

}  // namespace
}  // namespace loom
