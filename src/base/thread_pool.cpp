#include "base/thread_pool.h"

#include <fstream>
#include <set>
#include <string>
#include <utility>

#include <immintrin.h>

namespace loom {

int ThreadPool::physical_cores() {
  // Count distinct (physical id, core id) pairs; fall back to hardware_concurrency.
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<int, int>> cores;
  std::string line;
  int phys = 0;
  while (std::getline(in, line)) {
    if (line.rfind("physical id", 0) == 0) phys = std::stoi(line.substr(line.find(':') + 1));
    if (line.rfind("core id", 0) == 0) cores.insert({phys, std::stoi(line.substr(line.find(':') + 1))});
  }
  int n = static_cast<int>(cores.size());
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  return n > 0 ? n : 1;
}

ThreadPool::ThreadPool(int n_threads) {
  n_threads_ = n_threads > 0 ? n_threads : physical_cores();
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    generation_.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::run_tasks(int thread) {
  for (;;) {
    int64_t task = next_.fetch_add(1, std::memory_order_relaxed);
    if (task >= n_tasks_) break;
    (*fn_)(task, thread);
  }
}

void ThreadPool::worker_loop(int thread) {
  uint64_t seen = 0;
  for (;;) {
    // Spin a little (cheap hand-off between consecutive kernels), then sleep.
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < 20000; ++spin) {
      _mm_pause();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return generation_.load() != seen; });
      gen = generation_.load();
    }
    seen = gen;
    if (stop_) return;
    run_tasks(thread);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::parallel_for(int64_t n_tasks,
                              const std::function<void(int64_t task, int thread)>& fn) {
  if (n_tasks <= 0) return;
  if (n_threads_ == 1 || n_tasks == 1) {
    for (int64_t i = 0; i < n_tasks; ++i) fn(i, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_tasks_ = n_tasks;
    next_.store(0, std::memory_order_relaxed);
    pending_.store(n_threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();
  run_tasks(0);
  while (pending_.load(std::memory_order_acquire) != 0) _mm_pause();
  fn_ = nullptr;
}

}  // namespace loom
