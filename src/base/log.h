// Minimal leveled logging to stderr. LOOM_LOG_LEVEL=debug|info|warn|error (default info).
#pragma once

#include <cstdarg>

namespace loom {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void set_log_level(LogLevel level);
LogLevel log_level();
void log_message(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace loom

#define LOOM_LOG_DEBUG(...) ::loom::log_message(::loom::LogLevel::kDebug, __VA_ARGS__)
#define LOOM_LOG_INFO(...) ::loom::log_message(::loom::LogLevel::kInfo, __VA_ARGS__)
#define LOOM_LOG_WARN(...) ::loom::log_message(::loom::LogLevel::kWarn, __VA_ARGS__)
#define LOOM_LOG_ERROR(...) ::loom::log_message(::loom::LogLevel::kError, __VA_ARGS__)
