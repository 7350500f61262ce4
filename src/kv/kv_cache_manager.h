// KvCacheManager: one block table per sequence on top of a BlockPool. The scheduler asks it for
// room for a step's new tokens ("allocate slots"), which either succeeds or answers "no space"
// without side effects, so the scheduler can preempt and try again. It also finds the longest
// cached prefix of a new sequence (full blocks only) and counts prefix-cache hits in tokens.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/block_pool.h"

namespace loom {

// Cached blocks found for a sequence that has none yet; hand back to allocate_slots.
struct CachedPrefix {
  std::vector<KvBlock*> blocks;
  int32_t num_tokens = 0;  // blocks.size() * block_size
};

// What allocate_slots added; opaque to the scheduler beyond "it worked".
struct SlotAllocation {
  std::vector<int32_t> new_block_ids;
};

class KvCacheManager {
 public:
  KvCacheManager(int32_t num_blocks, int32_t block_size, bool enable_caching);

  int32_t block_size() const { return block_size_; }
  int32_t num_blocks() const { return pool_.num_blocks(); }
  int32_t num_free_blocks() const { return pool_.num_free_blocks(); }
  double usage() const { return pool_.usage(); }
  bool caching_enabled() const { return pool_.caching_enabled(); }
  // Blocks needed to hold n tokens.
  int32_t blocks_for(int64_t n_tokens) const;

  // Longest run of cached full blocks covering a prefix of `tokens`. At least one token is
  // always left uncached, since a sequence needs the logits of its last token.
  CachedPrefix find_cached_prefix(std::span<const int32_t> tokens, uint64_t salt);

  // Makes room for tokens [0, num_computed + num_new) of sequence `seq` (`tokens` holds at least
  // that many ids; they are needed to hash blocks that become full). `prefix`, only for a
  // sequence without blocks, is what find_cached_prefix returned; num_computed then includes
  // prefix->num_tokens. Returns nullopt and changes nothing if the pool has too few blocks.
  std::optional<SlotAllocation> allocate_slots(int64_t seq, std::span<const int32_t> tokens,
                                               int32_t num_computed, int32_t num_new,
                                               uint64_t salt,
                                               const CachedPrefix* prefix = nullptr);

  // Gives `child` the first `n_blocks` blocks of `parent` (shared: ref counts go up). Used by
  // n > 1 sampling: every sample reuses the prompt's full blocks.
  void fork(int64_t parent, int64_t child, int32_t n_blocks);

  // Releases every block of `seq` (no-op for an unknown sequence).
  void free(int64_t seq);
  bool has_blocks(int64_t seq) const { return tables_.count(seq) != 0; }

  // Physical block ids of `seq`, in logical order. Stable until the next allocate/free of seq.
  const std::vector<int32_t>& block_table(int64_t seq) const;

  // Prefix-cache accounting in tokens, counted when a new sequence is admitted.
  void record_prefix_query(int64_t queried_tokens, int64_t hit_tokens);
  int64_t prefix_query_tokens() const { return prefix_queries_; }
  int64_t prefix_hit_tokens() const { return prefix_hits_; }

  bool reset_prefix_cache() { return pool_.reset_prefix_cache(); }
  const BlockPool& pool() const { return pool_; }

 private:
  struct SeqBlocks {
    std::vector<KvBlock*> blocks;
    std::vector<int32_t> ids;        // == blocks[i]->id, the table handed to the model
    std::vector<BlockHash> hashes;   // chain hashes of the first hashes.size() full blocks
  };
  void cache_full_blocks(SeqBlocks& s, std::span<const int32_t> tokens, int32_t num_full,
                         uint64_t salt);

  int32_t block_size_;
  BlockPool pool_;
  std::unordered_map<int64_t, SeqBlocks> tables_;
  int64_t prefix_queries_ = 0;
  int64_t prefix_hits_ = 0;
};

}  // namespace loom
