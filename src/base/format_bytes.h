// Byte counts for people: "1.50 GiB", "12.3 MiB", "512 B" (binary units, as `free -h` and
// the Hugging Face CLI print them). One spelling for every command's output.
#pragma once

#include <cstdint>
#include <string>

namespace loom {

// `decimals`: digits after the point for KiB and MiB (GiB always has two).
std::string format_bytes(uint64_t bytes, int decimals = 1);

}  // namespace loom
