#include "base/format_bytes.h"

#include <cinttypes>
#include <cstdio>

namespace loom {

std::string format_bytes(uint64_t bytes, int decimals) {
  char buf[48];
  const double b = static_cast<double>(bytes);
  if (bytes >= (uint64_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(uint64_t{1} << 30));
  else if (bytes >= (uint64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.*f MiB", decimals, b / double(1 << 20));
  else if (bytes >= 1024)
    std::snprintf(buf, sizeof buf, "%.*f KiB", decimals, b / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%" PRIu64 " B", bytes);
  return buf;
}

}  // namespace loom
