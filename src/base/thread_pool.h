// One persistent worker pool for CPU kernels. The calling thread takes part as worker 0, so a
// pool of n threads starts n-1 workers. Workers spin briefly before sleeping so that
// back-to-back kernels (one per op in a forward pass) do not pay a futex wake-up each.
//
// Tasks are claimed from one atomic word holding (generation, next task index), so a job only
// waits for tasks that were actually claimed: a worker the OS has descheduled does not hold
// up the caller, which runs the unclaimed tasks itself (on a loaded 2-core machine the old
// "wait until every worker checked in" barrier stalled whole kernels).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "base/function_ref.h"

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
  // Not reentrant: fn must not call parallel_for on the same pool, and only one thread may
  // call parallel_for at a time.
  // fn is referenced, not copied (no allocation per call): it must live through the call.
  using TaskFn = FunctionRef<void(int64_t task, int thread)>;
  void parallel_for(int64_t n_tasks, TaskFn fn);

  static int physical_cores();

 private:
  static constexpr uint64_t kClosed = 0xFFFFFFFFu;  // task index of a finished job
  void worker_loop(int thread);
  void run_tasks(uint32_t generation, int thread);

  int n_threads_;
  std::vector<std::thread> workers_;
  // (generation << 32) | next task index; index kClosed once the job's tasks are all done.
  std::atomic<uint64_t> job_{kClosed};
  std::atomic<int64_t> n_tasks_{0};
  std::atomic<const TaskFn*> fn_{nullptr};
  std::atomic<int64_t> done_{0};  // tasks of the current job finished
  uint32_t generation_ = 0;       // caller side only
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace loom
