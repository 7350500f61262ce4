#include "engine/mask_worker.h"

#include "structured/matcher.h"

namespace loom {

MaskWorker::MaskWorker() : thread_([this] { loop(); }) {}

MaskWorker::~MaskWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void MaskWorker::start(const std::vector<Job>* jobs) {
  if (jobs->empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_ = jobs;
    busy_ = true;
  }
  cv_.notify_all();
}

void MaskWorker::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !busy_; });
}

void MaskWorker::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || busy_; });
    if (stop_) return;
    const std::vector<Job>* jobs = jobs_;
    lock.unlock();
    for (const Job& j : *jobs) j.matcher->fill_next_token_bitmask(j.mask);
    lock.lock();
    jobs_ = nullptr;
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace loom
