// How much memory this process may use: the machine's (/proc/meminfo) or, where a memory
// cgroup sets a lower limit (a container's --memory, a systemd unit's MemoryMax), the
// cgroup's. A server started in a container sized to 8 GiB plans its KV cache for 8 GiB, not
// for the host's RAM, and is not killed for the difference.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace loom {

struct SystemMemory {
  uint64_t total = 0;      // bytes; 0 where unknown
  uint64_t available = 0;  // bytes to be had without swapping: free plus reclaimable file cache
  std::string limited_by;  // empty: the machine's; else the cgroup file whose limit applies
};

// `root` prefixes /proc and /sys (tests build a tree of their own there).
SystemMemory system_memory(const std::string& root = "");

// MemTotal and MemAvailable from /proc/meminfo's text.
SystemMemory parse_meminfo(std::string_view meminfo);

}  // namespace loom
