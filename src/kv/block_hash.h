// Prefix-cache hashes of full KV blocks. A block's hash covers its parent's hash, its token ids
// and an optional salt (e.g. a LoRA id or a per-tenant cache key), so equal hashes mean equal
// whole prefixes, not just equal blocks. 128-bit XXH3 makes accidental collisions negligible.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

namespace loom {

struct BlockHash {
  uint64_t lo = 0;
  uint64_t hi = 0;
  bool operator==(const BlockHash&) const = default;
};

struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const { return static_cast<size_t>(h.lo); }
};

// parent: hash of the previous block (nullptr for the first block of a sequence).
BlockHash hash_block(const BlockHash* parent, std::span<const int32_t> tokens, uint64_t salt);

}  // namespace loom
