#include "base/version.h"

#ifndef LOOM_GIT_COMMIT
#define LOOM_GIT_COMMIT "unknown"
#endif
#ifndef LOOM_COMPILER
#define LOOM_COMPILER "unknown"
#endif
#ifndef LOOM_BUILD_TYPE
#define LOOM_BUILD_TYPE ""
#endif

namespace loom {

const BuildInfo& build_info() {
  static const BuildInfo info{kLoomVersion, LOOM_GIT_COMMIT, LOOM_COMPILER, LOOM_BUILD_TYPE};
  return info;
}

}  // namespace loom
