#include "base/huge_buffer.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>

#include "base/log.h"

namespace loom {
namespace {

constexpr uint64_t kHugePage = uint64_t{2} << 20;

// Faults in [p, p + bytes) for writing without changing a byte: MADV_POPULATE_WRITE where the
// kernel has it (5.14+), else an atomic add of zero to one byte per page (a write fault that
// keeps whatever a concurrent writer stored).
void populate(uint8_t* p, uint64_t bytes) {
#ifdef MADV_POPULATE_WRITE
  if (madvise(p, bytes, MADV_POPULATE_WRITE) == 0) return;
#endif
  for (uint64_t off = 0; off < bytes; off += 4096)
    __atomic_fetch_add(p + off, uint8_t{0}, __ATOMIC_RELAXED);
}

}  // namespace

void HugeBufferFree::operator()(uint8_t* p) const {
  std::free(p);
}

HugeBuffer allocate_huge(uint64_t bytes, bool commit) {
  const uint64_t size = (std::max<uint64_t>(bytes, 1) + kHugePage - 1) & ~(kHugePage - 1);
  HugeBuffer b(static_cast<uint8_t*>(std::aligned_alloc(kHugePage, size)));
  if (!b) throw std::bad_alloc();
  madvise(b.get(), size, MADV_HUGEPAGE);
  if (!commit) return b;
#ifdef MADV_POPULATE_WRITE
  if (madvise(b.get(), size, MADV_POPULATE_WRITE) == 0) return b;
#endif
  std::memset(b.get(), 0, size);
  return b;
}

BackgroundCommit::BackgroundCommit(std::vector<Range> ranges, std::string label,
                                   std::function<bool()> start_when)
    : ranges_(std::move(ranges)), label_(std::move(label)), start_when_(std::move(start_when)) {
  thread_ = std::thread([this] { run(); });
}

BackgroundCommit::~BackgroundCommit() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
}

void BackgroundCommit::wait() {
  if (thread_.joinable()) thread_.join();
}

void BackgroundCommit::run() {
  const auto asked = std::chrono::steady_clock::now();
  if (start_when_)
    while (!start_when_()) {
      if (stop_.load(std::memory_order_relaxed)) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  const auto start = std::chrono::steady_clock::now();
  // 2 MiB at a time: committing holds the process's memory-map lock, which every mmap and
  // munmap of the other threads waits for (large mallocs and frees). At 64 MiB a chunk, a
  // server setting up its tokenizer tables waited out the whole commit: /health answered
  // after 36.7 s with a 6 GB KV cache (qwen3moe-30b), after 2.3 s with qwen3moe-2b.
  constexpr uint64_t kChunk = uint64_t{2} << 20;
  for (const Range& r : ranges_)
    for (uint64_t off = 0; off < r.bytes; off += kChunk) {
      if (stop_.load(std::memory_order_relaxed)) return;
      populate(r.data + off, std::min(kChunk, r.bytes - off));
    }
  seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  done_.store(true, std::memory_order_release);
  if (label_.empty()) return;
  uint64_t bytes = 0;
  for (const Range& r : ranges_) bytes += r.bytes;
  const double waited = std::chrono::duration<double>(start - asked).count();
  if (waited >= 0.01)
    LOOM_LOG_INFO("%s: %.1f MiB committed in the background in %.2f s, after waiting %.2f s",
                  label_.c_str(), static_cast<double>(bytes) / (1 << 20), seconds_, waited);
  else
    LOOM_LOG_INFO("%s: %.1f MiB committed in the background in %.2f s", label_.c_str(),
                  static_cast<double>(bytes) / (1 << 20), seconds_);
}

}  // namespace loom
