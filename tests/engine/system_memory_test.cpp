// system_memory (base/system_memory.h): the machine's memory from /proc/meminfo, or a memory
// cgroup's where its limit is lower (v1 and v2 hierarchies, a limit set above the process's
// own cgroup, a container that sees its cgroup mounted at the top), on trees built here.
#include "base/system_memory.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "format/format_test_util.h"

namespace loom {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

class SystemMemoryTree : public ::testing::Test {
 protected:
  void put(const std::string& path, const std::string& text) {
    const std::filesystem::path p = dir.file(path);
    std::filesystem::create_directories(p.parent_path());
    test::write_file(p.string(), text);
  }
  void machine(uint64_t total_gib, uint64_t available_gib) {
    put("proc/meminfo", "MemTotal:       " + std::to_string(total_gib << 20) +
                            " kB\nMemFree:          123 kB\nMemAvailable:   " +
                            std::to_string(available_gib << 20) + " kB\n");
  }
  SystemMemory read() { return system_memory(dir.path()); }
  test::TempDir dir;
};

TEST(SystemMemory, ParsesMeminfo) {
  const SystemMemory m = parse_meminfo(
      "MemTotal:       24576000 kB\nMemFree:         1000 kB\nMemAvailable:   20480000 kB\n"
      "Buffers:           12 kB\n");
  EXPECT_EQ(m.total, uint64_t{24576000} * 1024);
  EXPECT_EQ(m.available, uint64_t{20480000} * 1024);
  EXPECT_TRUE(m.limited_by.empty());
  EXPECT_EQ(parse_meminfo("").total, 0u);
}

TEST_F(SystemMemoryTree, V1LimitAboveTheProcessesCgroupApplies) {
  machine(24, 20);
  put("proc/self/cgroup", "5:cpu,cpuacct:/a/b\n4:memory:/a/b\n0::/\n");
  put("sys/fs/cgroup/memory/a/b/memory.limit_in_bytes", "9223372036854771712\n");  // none
  put("sys/fs/cgroup/memory/a/memory.limit_in_bytes", std::to_string(4 * kGiB) + "\n");
  put("sys/fs/cgroup/memory/a/memory.usage_in_bytes", std::to_string(3 * kGiB) + "\n");
  put("sys/fs/cgroup/memory/a/memory.stat",
      "cache 5\nrss 7\ntotal_cache " + std::to_string(kGiB) + "\ntotal_rss 9\n");
  put("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  const SystemMemory m = read();
  EXPECT_EQ(m.total, 4 * kGiB);
  EXPECT_EQ(m.available, 2 * kGiB);  // 4 less the 2 of its 3 GiB that are not file cache
  EXPECT_EQ(std::filesystem::path(m.limited_by),
            std::filesystem::path(dir.path() + "/sys/fs/cgroup/memory/a/memory.limit_in_bytes"));
}

TEST_F(SystemMemoryTree, V2LimitAndFileCache) {
  machine(24, 20);
  put("proc/self/cgroup", "0::/user.slice/run.scope\n");
  put("sys/fs/cgroup/user.slice/run.scope/memory.max", "max\n");
  put("sys/fs/cgroup/user.slice/memory.max", std::to_string(8 * kGiB) + "\n");
  put("sys/fs/cgroup/user.slice/memory.current", std::to_string(kGiB) + "\n");
  put("sys/fs/cgroup/user.slice/memory.stat", "anon 100\nfile " + std::to_string(kGiB / 2) + "\n");
  const SystemMemory m = read();
  EXPECT_EQ(m.total, 8 * kGiB);
  EXPECT_EQ(m.available, 8 * kGiB - kGiB / 2);
  EXPECT_NE(m.limited_by.find("user.slice/memory.max"), std::string::npos);
}

TEST_F(SystemMemoryTree, ContainerSeesItsCgroupAtTheTop) {
  // The path names the host's hierarchy, which the container does not have.
  machine(24, 20);
  put("proc/self/cgroup", "0::/docker/0123abcd\n");
  put("sys/fs/cgroup/memory.max", std::to_string(2 * kGiB) + "\n");
  put("sys/fs/cgroup/memory.current", std::to_string(kGiB / 4) + "\n");
  const SystemMemory m = read();
  EXPECT_EQ(m.total, 2 * kGiB);
  EXPECT_EQ(m.available, 2 * kGiB - kGiB / 4);
}

TEST_F(SystemMemoryTree, TheMachineWhereNoLimitIsLower) {
  machine(24, 20);
  put("proc/self/cgroup", "0::/a\n");
  put("sys/fs/cgroup/a/memory.max", "max\n");
  put("sys/fs/cgroup/memory.max", std::to_string(64 * kGiB) + "\n");  // above the machine's
  SystemMemory m = read();
  EXPECT_EQ(m.total, 24 * kGiB);
  EXPECT_EQ(m.available, 20 * kGiB);
  EXPECT_TRUE(m.limited_by.empty());
  // A limit below the machine's total, but the machine has less available still.
  machine(24, 1);
  put("sys/fs/cgroup/a/memory.max", std::to_string(6 * kGiB) + "\n");
  m = read();
  EXPECT_EQ(m.total, 6 * kGiB);
  EXPECT_EQ(m.available, kGiB);
}

TEST_F(SystemMemoryTree, NoCgroupFilesAtAll) {
  machine(16, 12);
  const SystemMemory m = read();
  EXPECT_EQ(m.total, 16 * kGiB);
  EXPECT_EQ(m.available, 12 * kGiB);
}

TEST(SystemMemory, ThisMachine) {
  const SystemMemory m = system_memory();
  EXPECT_GT(m.total, 0u);
  EXPECT_GT(m.available, 0u);
  EXPECT_LE(m.available, m.total);
}

}  // namespace
}  // namespace loom
