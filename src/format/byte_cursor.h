// ByteCursor: bounds-checked little-endian reads over an untrusted byte range (file parsers).
// Every read either succeeds or returns an error naming what was being read and where; no
// read ever touches memory past the end.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "base/status.h"

namespace loom {

class ByteCursor {
 public:
  ByteCursor(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t size() const { return size_; }
  uint64_t remaining() const { return size_ - pos_; }

  // Reads a little-endian integer or float (loom only targets little-endian hosts).
  template <typename T>
  Status read(T* out, std::string_view what) {
    if (remaining() < sizeof(T)) return truncated(what, sizeof(T));
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::ok();
  }

  // A view of the next n bytes (no copy).
  Status read_bytes(uint64_t n, std::string_view* out, std::string_view what) {
    if (remaining() < n) return truncated(what, n);
    *out = std::string_view(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return Status::ok();
  }

  Status truncated(std::string_view what, uint64_t need) const {
    return invalid_file("truncated file: " + std::string(what) + " needs " + std::to_string(need) +
                        " bytes at offset " + std::to_string(pos_) + " but only " +
                        std::to_string(remaining()) + " remain");
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "loom's file readers assume little-endian");

}  // namespace loom
