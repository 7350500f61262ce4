// BackgroundCommit (base/huge_buffer.h): a thread faults in every range of fresh memory; with a
// start_when predicate it touches nothing until the predicate holds (the engine's KV cache waits
// so for a model's weight copies), and it stops promptly when dropped while waiting.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "base/huge_buffer.h"

namespace loom {
namespace {

constexpr uint64_t kBytes = uint64_t{16} << 20;

// Fresh anonymous memory (its own mapping: nothing of it resident until touched, which a
// malloc'd block reusing freed pages could not promise).
struct Fresh {
  explicit Fresh(uint64_t n) : bytes(n) {
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
  }
  ~Fresh() {
    if (data) munmap(data, bytes);
  }
  uint8_t* get() const { return data; }
  uint8_t* data = nullptr;
  uint64_t bytes;
};

// Pages of [p, p + bytes) backed by memory now (anonymous memory: mincore tells).
size_t resident_pages(const uint8_t* p, uint64_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> v((bytes + page - 1) / page);
  if (mincore(const_cast<uint8_t*>(p), bytes, v.data()) != 0) return 0;
  size_t n = 0;
  for (unsigned char c : v) n += c & 1;
  return n;
}

TEST(BackgroundCommit, FaultsInEveryRange) {
  Fresh a(kBytes), b(kBytes);
  ASSERT_TRUE(a.get() && b.get());
  BackgroundCommit commit({{a.get(), kBytes}, {b.get(), kBytes / 2}});
  commit.wait();
  EXPECT_TRUE(commit.done());
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  EXPECT_EQ(resident_pages(a.get(), kBytes), kBytes / page);
  EXPECT_EQ(resident_pages(b.get(), kBytes / 2), kBytes / 2 / page);
}

TEST(BackgroundCommit, WaitsForItsStartCondition) {
  Fresh a(kBytes);
  ASSERT_TRUE(a.get());
  auto go = std::make_shared<std::atomic<bool>>(false);
  BackgroundCommit commit({{a.get(), kBytes}}, "", [go] { return go->load(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(commit.done());
  EXPECT_EQ(resident_pages(a.get(), kBytes), 0u) << "committed before its condition held";
  go->store(true);
  commit.wait();
  EXPECT_TRUE(commit.done());
  EXPECT_EQ(resident_pages(a.get(), kBytes), kBytes / static_cast<size_t>(sysconf(_SC_PAGESIZE)));
}

TEST(BackgroundCommit, DroppedWhileWaitingStopsPromptly) {
  Fresh a(kBytes);
  ASSERT_TRUE(a.get());
  const auto t0 = std::chrono::steady_clock::now();
  {
    BackgroundCommit commit({{a.get(), kBytes}}, "", [] { return false; });
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_EQ(resident_pages(a.get(), kBytes), 0u);
}

}  // namespace
}  // namespace loom
