// SHA-256 of a file (OpenSSL's implementation), the digest the Hub lists for LFS files.
#pragma once

#include <string>

#include "base/status.h"

namespace loom::hub {

// Lower-case hex digest of the file's bytes.
Result<std::string> sha256_file(const std::string& path);

}  // namespace loom::hub
