// Fuzz target: a safetensors file from untrusted bytes: the header's JSON, dtypes, shapes and
// data offsets, then every tensor view it hands out.
#include <memory>
#include <vector>

#include "format/safetensors.h"
#include "fuzz_target.h"

LOOM_FUZZ_TARGET(safetensors) {
  auto bytes = std::make_shared<const std::vector<uint8_t>>(data, data + size);
  auto file = loom::SafetensorsFile::parse_bytes(bytes);
  if (!file.is_ok()) {
    LOOM_FUZZ_CHECK(!file.status().message().empty(), "an error names its problem");
    return;
  }
  const uint8_t* begin = bytes->data();
  const uint8_t* end = begin + bytes->size();
  for (const auto& t : file->tensors()) {
    LOOM_FUZZ_CHECK(file->find(t.name) != nullptr, "every tensor can be found by name");
    const auto* p = static_cast<const uint8_t*>(t.view.data);
    const uint64_t n = t.view.nbytes;
    LOOM_FUZZ_CHECK(n == 0 || (p >= begin && p <= end && n <= static_cast<uint64_t>(end - p)),
                    "a tensor's bytes lie inside the file");
    // Touch the first and last byte: ASan reports a view that points outside the buffer.
    if (n > 0) {
      volatile uint8_t first = p[0], last = p[n - 1];
      (void)first;
      (void)last;
    }
  }
}
