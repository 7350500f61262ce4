#include "base/thread_pool.h"

#include <immintrin.h>

#include <fstream>
#include <set>
#include <string>
#include <utility>

namespace loom {

int ThreadPool::physical_cores() {
  // Count distinct (physical id, core id) pairs; fall back to hardware_concurrency.
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<int, int>> cores;
  std::string line;
  int phys = 0;
  while (std::getline(in, line)) {
    if (line.rfind("physical id", 0) == 0) phys = std::stoi(line.substr(line.find(':') + 1));
    if (line.rfind("core id", 0) == 0)
      cores.insert({phys, std::stoi(line.substr(line.find(':') + 1))});
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
    stop_.store(true);
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::run_tasks(uint32_t generation, int thread) {
  // seq_cst throughout: the n_tasks_ read must stay before the claiming CAS (see job_).
  uint64_t j = job_.load();
  for (;;) {
    if (static_cast<uint32_t>(j >> 32) != generation) return;
    const uint64_t idx = j & kClosed;
    // A stale n_tasks_ (already the next job's) can only be read after this job was closed,
    // and then the CAS below fails.
    if (idx >= static_cast<uint64_t>(n_tasks_.load())) return;
    if (!job_.compare_exchange_weak(j, j + 1)) continue;  // j reloaded
    (*fn_.load())(static_cast<int64_t>(idx), thread);
    done_.fetch_add(1);
    j = job_.load();
  }
}

void ThreadPool::worker_loop(int thread) {
  uint32_t seen = 0;
  for (;;) {
    auto fresh = [&] {
      const uint64_t j = job_.load();
      return static_cast<uint32_t>(j >> 32) != seen && (j & kClosed) != kClosed;
    };
    // Spin a little (cheap hand-off between consecutive kernels), then sleep.
    for (int spin = 0; spin < 20000 && !fresh() && !stop_.load(std::memory_order_relaxed); ++spin)
      _mm_pause();
    if (!fresh()) {
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1);
      cv_.wait(lock, [&] { return stop_.load() || fresh(); });
      sleepers_.fetch_sub(1);
    }
    if (stop_.load()) return;
    seen = static_cast<uint32_t>(job_.load() >> 32);
    run_tasks(seen, thread);
  }
}

void ThreadPool::parallel_for(int64_t n_tasks, TaskFn fn) {
  if (n_tasks <= 0) return;
  if (n_threads_ == 1 || n_tasks == 1) {
    for (int64_t i = 0; i < n_tasks; ++i) fn(i, 0);
    return;
  }
  if (n_tasks >= static_cast<int64_t>(kClosed)) {  // does not fit the index field: split
    const int64_t half = n_tasks / 2;
    parallel_for(half, fn);
    const auto rest = [&](int64_t i, int t) { fn(half + i, t); };
    parallel_for(n_tasks - half, rest);
    return;
  }
  // job_ is closed here (index kClosed), so no worker can claim while the job is set up.
  ++generation_;
  if (generation_ == 0) ++generation_;  // 0 is the workers' initial "seen"
  fn_.store(&fn);
  n_tasks_.store(n_tasks);
  done_.store(0);
  job_.store(static_cast<uint64_t>(generation_) << 32);
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
  run_tasks(generation_, 0);
  while (done_.load() != n_tasks) _mm_pause();
  job_.store((static_cast<uint64_t>(generation_) << 32) | kClosed);
}

}  // namespace loom
