// Checked arithmetic for sizes computed from file data or requests: overflow is an error,
// never a wrap-around that turns into a short allocation or an out-of-bounds read.
#pragma once

#include <cstdint>
#include <optional>

namespace loom {

inline std::optional<uint64_t> checked_add(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// a * b * c ..., nullopt on overflow.
template <typename... Ts>
inline std::optional<uint64_t> checked_product(uint64_t first, Ts... rest) {
  std::optional<uint64_t> acc = first;
  ((acc = acc ? checked_mul(*acc, static_cast<uint64_t>(rest)) : std::nullopt), ...);
  return acc;
}

// Round up to a multiple of `align` (a power of two or any positive value), nullopt on overflow.
inline std::optional<uint64_t> checked_align_up(uint64_t v, uint64_t align) {
  if (align == 0) return std::nullopt;
  uint64_t rem = v % align;
  if (rem == 0) return v;
  return checked_add(v, align - rem);
}

}  // namespace loom
