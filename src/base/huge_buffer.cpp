#include "base/huge_buffer.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace loom {

void HugeBufferFree::operator()(uint8_t* p) const {
  std::free(p);
}

HugeBuffer allocate_huge(uint64_t bytes, bool commit) {
  const uint64_t huge = uint64_t{2} << 20;
  const uint64_t size = (std::max<uint64_t>(bytes, 1) + huge - 1) & ~(huge - 1);
  HugeBuffer b(static_cast<uint8_t*>(std::aligned_alloc(huge, size)));
  if (!b) throw std::bad_alloc();
  madvise(b.get(), size, MADV_HUGEPAGE);
  if (!commit) return b;
#ifdef MADV_POPULATE_WRITE
  if (madvise(b.get(), size, MADV_POPULATE_WRITE) == 0) return b;
#endif
  std::memset(b.get(), 0, size);
  return b;
}

}  // namespace loom
