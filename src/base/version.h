// loom's version and how this binary was built: `loom --version`, GET /version, Ollama's
// /api/version.
#pragma once

#include <string>

namespace loom {

inline constexpr const char* kLoomVersion = "0.1.0";

struct BuildInfo {
  std::string version = kLoomVersion;
  std::string commit;    // git commit the build was configured at ("unknown" outside git)
  std::string compiler;  // e.g. "GNU 12.2.0"
  std::string build_type;
};
const BuildInfo& build_info();

}  // namespace loom
