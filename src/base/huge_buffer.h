// Large, long-lived buffers (weights, KV cache) in 2 MiB-aligned memory advised for
// transparent huge pages: streaming them then costs one TLB entry and one page fault per
// 2 MiB instead of per 4 KiB.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace loom {

struct HugeBufferFree {
  void operator()(uint8_t* p) const;
};
using HugeBuffer = std::unique_ptr<uint8_t, HugeBufferFree>;

// At least `bytes` (rounded up to 2 MiB); throws std::bad_alloc when memory is short.
// commit: fault every page in now (zeroed) rather than on first write.
HugeBuffer allocate_huge(uint64_t bytes, bool commit);

// Commits (faults in) memory ranges on a background thread, a chunk at a time, while their
// owner already uses them: the pages' contents are never changed (a page someone has written
// keeps what was written), so the owner needs no synchronisation with it. This is how a
// server becomes ready in well under a second with a multi-GiB KV cache and still has every
// page committed a few seconds later, instead of zeroing fresh pages inside the first steps
// that reach them. The destructor stops the thread (before the ranges may be freed).
class BackgroundCommit {
 public:
  struct Range {
    uint8_t* data;
    uint64_t bytes;
  };
  // label: when set, an info line says how much was committed and how long it took.
  // start_when: when set, committing waits until it returns true (polled on the committing
  // thread; it must stay callable for the commit's life).
  explicit BackgroundCommit(std::vector<Range> ranges, std::string label = "",
                            std::function<bool()> start_when = nullptr);
  ~BackgroundCommit();
  BackgroundCommit(const BackgroundCommit&) = delete;
  BackgroundCommit& operator=(const BackgroundCommit&) = delete;

  // Blocks until every range is committed (tests, benchmarks that must not measure faults).
  void wait();
  bool done() const { return done_.load(std::memory_order_acquire); }
  double seconds() const { return seconds_; }  // how long committing took, once done()

 private:
  void run();
  std::vector<Range> ranges_;
  std::string label_;
  std::function<bool()> start_when_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> done_{false};
  double seconds_ = 0;
  std::thread thread_;
};

}  // namespace loom
