#include "base/system_memory.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

namespace loom {

namespace {

std::optional<std::string> read_text(const std::filesystem::path& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// A cgroup file holding one number ("max": no limit).
std::optional<uint64_t> read_number(const std::filesystem::path& path) {
  auto text = read_text(path);
  if (!text) return std::nullopt;
  try {
    return static_cast<uint64_t>(std::stoull(*text));
  } catch (...) {
    return std::nullopt;  // "max", or not a number
  }
}

// The value of `key` in a memory.stat ("key value" lines).
uint64_t stat_value(const std::string& stat, std::string_view key) {
  std::istringstream in(stat);
  std::string k;
  uint64_t v = 0;
  while (in >> k >> v)
    if (k == key) return v;
  return 0;
}

struct Controller {
  std::filesystem::path mount;  // where its hierarchy is mounted
  std::string path;             // this process's cgroup in it (/proc/self/cgroup)
  bool v2 = false;
};

// The memory controller's hierarchy (v1: the line naming "memory"; v2: the "0::" line).
std::optional<Controller> memory_controller(const std::string& root) {
  auto text = read_text(root + "/proc/self/cgroup");
  if (!text) return std::nullopt;
  std::optional<Controller> v2;
  std::istringstream lines(*text);
  for (std::string line; std::getline(lines, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    std::istringstream names(controllers);
    for (std::string name; std::getline(names, name, ',');)
      if (name == "memory") return Controller{root + "/sys/fs/cgroup/memory", path, false};
    if (line.rfind("0::", 0) == 0) v2 = Controller{root + "/sys/fs/cgroup", path, true};
  }
  return v2;
}

}  // namespace

SystemMemory parse_meminfo(std::string_view meminfo) {
  SystemMemory m;
  std::istringstream in{std::string(meminfo)};
  std::string key, unit;
  uint64_t kib = 0;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemTotal:") m.total = kib * 1024;
    if (key == "MemAvailable:") m.available = kib * 1024;
  }
  return m;
}

SystemMemory system_memory(const std::string& root) {
  SystemMemory m = parse_meminfo(read_text(root + "/proc/meminfo").value_or(""));
  std::optional<Controller> c = memory_controller(root);
  if (!c) return m;
  // The process's cgroup and every one above it limit it: the lowest limit applies. Inside a
  // container the path may name the host's hierarchy while the container sees its own cgroup
  // mounted at the top: a directory that is not there is skipped.
  const char* limit_file = c->v2 ? "memory.max" : "memory.limit_in_bytes";
  const char* usage_file = c->v2 ? "memory.current" : "memory.usage_in_bytes";
  std::filesystem::path dir = c->mount / std::filesystem::path(c->path).relative_path();
  std::optional<std::filesystem::path> limited;
  uint64_t limit = m.total > 0 ? m.total : UINT64_MAX;
  for (;;) {
    if (auto l = read_number(dir / limit_file); l && *l < limit) limit = *l, limited = dir;
    if (dir == c->mount || !dir.has_relative_path() || dir.parent_path() == dir) break;
    dir = dir.parent_path();
  }
  if (!limited) return m;
  const uint64_t usage = read_number(*limited / usage_file).value_or(0);
  // What the cgroup holds of the page cache is reclaimable, as MemAvailable counts it.
  const std::string stat = read_text(*limited / "memory.stat").value_or("");
  const uint64_t file_cache = c->v2 ? stat_value(stat, "file")
                              : stat_value(stat, "total_cache") > 0
                                  ? stat_value(stat, "total_cache")
                                  : stat_value(stat, "cache");
  const uint64_t held = usage - std::min(usage, file_cache);  // what reclaim cannot free
  const uint64_t cgroup_available = held >= limit ? 0 : limit - held;
  m.total = limit;
  m.available = std::min(m.available > 0 ? m.available : UINT64_MAX, cgroup_available);
  m.limited_by = (*limited / limit_file).string();
  return m;
}

}  // namespace loom
