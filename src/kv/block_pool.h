// BlockPool: the KV cache's physical blocks as bookkeeping (the memory itself is KvCache's).
// Each block has a ref count (how many sequences use it). Blocks with ref count 0 sit on one
// intrusive doubly-linked free list in eviction order: the head is reused first. A full block
// may carry a prefix-cache hash; freed blocks keep their hash until they are reused, so a later
// request with the same prefix can take them back off the free list (a cache hit).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"

namespace loom {

struct KvBlock {
  int32_t id = 0;
  int32_t ref_count = 0;
  std::optional<BlockHash> hash;  // set while the block is registered in the prefix cache
  KvBlock* prev_free = nullptr;   // free-list links; meaningful only while ref_count == 0
  KvBlock* next_free = nullptr;
  bool on_free_list = false;
};

class BlockPool {
 public:
  BlockPool(int32_t num_blocks, bool enable_caching);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  // Blocks with ref count 0, including cached ones that could be evicted.
  int32_t num_free_blocks() const { return num_free_; }
  bool caching_enabled() const { return enable_caching_; }
  // Fraction of blocks in use by some sequence (0..1).
  double usage() const;

  // Takes n blocks from the head of the free list, evicting any hash they carried; each comes
  // back with ref count 1. Returns an empty vector (and changes nothing) if fewer than n are free.
  std::vector<KvBlock*> allocate(int32_t n);
  // The cached block holding this prefix hash, or nullptr.
  KvBlock* lookup(const BlockHash& hash) const;
  // Adds a reference to each block, taking those with ref count 0 off the free list.
  void touch(std::span<KvBlock* const> blocks);
  // Registers a full block under `hash`. If another block already holds that hash (two
  // sequences computed the same prefix at once) this block simply stays unregistered.
  void cache(KvBlock* block, const BlockHash& hash);
  // Drops one reference from each block, in the given order. A block reaching ref count 0 goes
  // to the free list: cached blocks to the tail (evicted last, most recently used), uncached
  // ones to the head (nothing to keep). Callers pass a sequence's blocks last-first, so a
  // prefix's later blocks are evicted before its earlier ones.
  void release(std::span<KvBlock* const> blocks);
  // Takes a free block out of circulation for good (a sliding-window group's null block): it
  // keeps ref count 1 and does not count as in use for reset_prefix_cache.
  KvBlock* reserve_block();
  // Forgets every cached hash (only when no block is in use). Returns false if some are.
  bool reset_prefix_cache();

  KvBlock* block(int32_t id) { return &blocks_[id]; }
  const KvBlock& block(int32_t id) const { return blocks_[id]; }
  int32_t num_cached_blocks() const { return static_cast<int32_t>(cached_.size()); }
  // Free-list ids from head (next to be evicted) to tail; for tests.
  std::vector<int32_t> free_list_ids() const;
  // Internal consistency (ref counts, free list, hash map); "" when fine. For tests.
  std::string check_invariants() const;

 private:
  void push_head(KvBlock* b);
  void push_tail(KvBlock* b);
  void unlink(KvBlock* b);
  void evict_hash(KvBlock* b);

  bool enable_caching_;
  std::vector<KvBlock> blocks_;
  KvBlock head_;  // sentinel: head_.next_free is the first free block, head_.prev_free the last
  int32_t num_free_ = 0;
  int32_t num_reserved_ = 0;
  std::unordered_map<BlockHash, KvBlock*, BlockHashHasher> cached_;
};

}  // namespace loom
