#include "base/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace loom {
namespace {

LogLevel level_from_env() {
  const char* s = std::getenv("LOOM_LOG_LEVEL");
  if (s == nullptr) return LogLevel::kInfo;
  if (std::strcmp(s, "debug") == 0) return LogLevel::kDebug;
  if (std::strcmp(s, "warn") == 0) return LogLevel::kWarn;
  if (std::strcmp(s, "error") == 0) return LogLevel::kError;
  return LogLevel::kInfo;
}

std::atomic<LogLevel> g_level{level_from_env()};
std::mutex g_mu;

}  // namespace

void set_log_level(LogLevel level) { g_level = level; }
LogLevel log_level() { return g_level; }

void log_message(LogLevel level, const char* fmt, ...) {
  if (level < g_level.load()) return;
  static const char* kTags[] = {"D", "I", "W", "E"};
  std::lock_guard<std::mutex> lock(g_mu);
  std::fprintf(stderr, "[loom %s] ", kTags[static_cast<int>(level)]);
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputc('\n', stderr);
}

}  // namespace loom
