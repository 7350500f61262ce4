#include "kv/block_hash.h"

// The state struct is only public with static linking of its layout; the library is the
// system one this file is compiled against, so the layout matches.
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

namespace loom {

BlockHash hash_block(const BlockHash* parent, std::span<const int32_t> tokens, uint64_t salt) {
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  // A first block hashes a distinct marker instead of a parent, so "no parent" never equals a
  // parent whose hash happens to be zero.
  const uint8_t has_parent = parent != nullptr;
  XXH3_128bits_update(&state, &has_parent, sizeof(has_parent));
  if (parent) XXH3_128bits_update(&state, parent, sizeof(*parent));
  XXH3_128bits_update(&state, &salt, sizeof(salt));
  XXH3_128bits_update(&state, tokens.data(), tokens.size_bytes());
  XXH128_hash_t h = XXH3_128bits_digest(&state);
  return BlockHash{h.low64, h.high64};
}

}  // namespace loom
