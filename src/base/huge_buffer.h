// Large, long-lived buffers (weights, KV cache) in 2 MiB-aligned memory advised for
// transparent huge pages: streaming them then costs one TLB entry and one page fault per
// 2 MiB instead of per 4 KiB.
#pragma once

#include <cstdint>
#include <memory>

namespace loom {

struct HugeBufferFree {
  void operator()(uint8_t* p) const;
};
using HugeBuffer = std::unique_ptr<uint8_t, HugeBufferFree>;

// At least `bytes` (rounded up to 2 MiB); throws std::bad_alloc when memory is short.
// commit: fault every page in now (zeroed) rather than on first write.
HugeBuffer allocate_huge(uint64_t bytes, bool commit);

}  // namespace loom
