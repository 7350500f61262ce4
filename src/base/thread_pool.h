// One persistent worker pool for CPU kernels. The calling thread takes part as worker 0, so a
// pool of n threads starts n-1 workers. Jobs are handed out by an atomic counter; workers spin
// briefly before sleeping so that back-to-back kernels (one per op in a forward pass) do not
// pay a futex wake-up each.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace loom {

class ThreadPool {
 public:
  // n_threads <= 0: one per physical core.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(task, thread) for task in [0, n_tasks), spread over the pool; returns when all
  // are done. `thread` in [0, size()) identifies the worker (for per-thread scratch).
  // Not reentrant: fn must not call parallel_for on the same pool.
  void parallel_for(int64_t n_tasks, const std::function<void(int64_t task, int thread)>& fn);

  static int physical_cores();

 private:
  void worker_loop(int thread);
  void run_tasks(int thread);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  const std::function<void(int64_t, int)>* fn_ = nullptr;
  int64_t n_tasks_ = 0;
  std::atomic<int64_t> next_{0};
  std::atomic<int> pending_{0};      // workers still inside the current generation
  std::atomic<uint64_t> generation_{0};
  bool stop_ = false;
};

}  // namespace loom
