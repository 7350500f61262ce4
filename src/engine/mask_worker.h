// MaskWorker: fills the grammar masks of a step's constrained rows on a background thread, so
// that mask work overlaps the forward pass (DESIGN.md: the masks for step N+1 are computed
// while step N runs). A mask depends only on the tokens a sequence accepted before this step,
// which are all known when the forward pass starts.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

namespace loom {

namespace structured {
class GrammarMatcher;
}

class MaskWorker {
 public:
  struct Job {
    structured::GrammarMatcher* matcher;
    std::span<uint32_t> mask;
  };

  MaskWorker();
  ~MaskWorker();
  MaskWorker(const MaskWorker&) = delete;
  MaskWorker& operator=(const MaskWorker&) = delete;

  // Starts filling every job's mask; `jobs` must stay alive and unchanged until wait().
  void start(const std::vector<Job>* jobs);
  // Blocks until the jobs given to start() are done (returns at once if none were given).
  void wait();

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  const std::vector<Job>* jobs_ = nullptr;  // set by start(), cleared when done
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace loom
