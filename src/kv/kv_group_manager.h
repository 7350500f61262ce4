// KvGroupManager: the blocks of one layer group (DESIGN.md "KV storage"): its own BlockPool and,
// per sequence, a block table over the sequence's logical blocks (block i holds positions
// [i * block_size, (i + 1) * block_size)). Every group of a sequence has the same number of
// table entries; the KvCoordinator keeps them in step.
//
// window == 0: full attention, every block is kept while the sequence lives.
// window > 0: a sliding-window group. A query at position p reads keys [p - window + 1, p], so
// once a sequence has computed c tokens no later query reads a block that ends before
// c - window + 1: such blocks are released as the sequence grows (vLLM's sliding-window
// manager), and their table entries point at the group's null block, a block reserved at
// start-up that is never handed out (a stray read of it is harmless; the kernels never read it
// because their ranges start at the window). A prefix-cache hit then needs only the blocks of
// the window before the hit's end.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"
#include "kv/block_pool.h"

namespace loom {

class KvGroupManager {
 public:
  // num_blocks: blocks sequences can use (a sliding-window group allocates one more, its null
  // block).
  KvGroupManager(int32_t window, int32_t num_blocks, int32_t block_size, bool enable_caching);
  KvGroupManager(const KvGroupManager&) = delete;
  KvGroupManager& operator=(const KvGroupManager&) = delete;

  int32_t window() const { return window_; }
  int32_t block_size() const { return block_size_; }
  // Blocks sequences can use, and how many of them are free (cached ones included).
  int32_t num_blocks() const { return pool_.num_blocks() - (null_block_ ? 1 : 0); }
  int32_t num_free_blocks() const { return pool_.num_free_blocks(); }
  int32_t num_used_blocks() const { return num_blocks() - num_free_blocks(); }
  // Blocks released because they fell out of a sequence's window, since start-up.
  int64_t num_window_released_blocks() const { return window_released_; }

  // The first logical block a sequence with `num_computed` tokens still reads (0 without a
  // window).
  int32_t first_live_block(int64_t num_computed) const;
  // The most blocks one sequence of n_tokens holds at once when a step computes at most
  // max_step tokens of it.
  int32_t peak_blocks(int64_t n_tokens, int32_t max_step) const;

  // Of the hit candidates `hashes` (chain hashes of a sequence's first full blocks), the
  // longest prefix of at most max_blocks blocks this group can serve: all its blocks cached
  // (full attention) or those of the window before its end (sliding window).
  int32_t longest_hit(std::span<const BlockHash> hashes, int32_t max_blocks) const;
  // The blocks of a hit of n blocks found by longest_hit: nullptr where the window does not
  // need the block.
  std::vector<KvBlock*> hit_blocks(std::span<const BlockHash> hashes, int32_t n) const;

  // Releases the blocks of `seq` no query after num_computed tokens reads (sliding window).
  void release_outside_window(int64_t seq, int64_t num_computed);
  // Free blocks that giving `seq` a table covering n_tokens would take: new blocks plus cached
  // prefix blocks (on the free list while nobody uses them) it revives.
  int32_t blocks_to_take(int64_t seq, int64_t n_tokens, std::span<KvBlock* const> prefix) const;
  // Extends the table of `seq` to cover n_tokens, starting from `prefix` (only for a sequence
  // without blocks). The caller checked blocks_to_take against num_free_blocks.
  void grow(int64_t seq, int64_t n_tokens, std::span<KvBlock* const> prefix);
  // Releases the blocks of `seq` past the first n_tokens tokens (a no-op when it has fewer).
  void shrink(int64_t seq, int64_t n_tokens);
  // Registers the blocks [from, hashes.size()) of `seq` in the prefix cache (a released one is
  // already registered or never will be).
  void cache_blocks(int64_t seq, std::span<const BlockHash> hashes, int32_t from);

  // Whether a child of `parent` can start from its first n_blocks blocks: false when the
  // window of a sequence at n_blocks * block_size tokens needs a block the parent released.
  bool can_fork(int64_t parent, int32_t n_blocks) const;
  // Gives `child` the first n_blocks entries of `parent`'s table (ref counts go up).
  void fork(int64_t parent, int64_t child, int32_t n_blocks);
  // Releases every block of `seq`, last first (no-op for an unknown sequence).
  void free(int64_t seq);
  bool has_blocks(int64_t seq) const { return tables_.count(seq) != 0; }
  // Physical block ids of `seq` in logical order (the null block where released).
  const std::vector<int32_t>& block_table(int64_t seq) const;

  bool reset_prefix_cache() { return pool_.reset_prefix_cache(); }
  const BlockPool& pool() const { return pool_; }
  // Pool invariants, and the null block still reserved; "" when fine.
  std::string check_invariants() const;

 private:
  struct SeqBlocks {
    std::vector<KvBlock*> blocks;  // nullptr where released (the table has the null block)
    std::vector<int32_t> ids;      // the table handed to the model
    int32_t num_released = 0;      // blocks [0, num_released) are released
  };
  int32_t blocks_for(int64_t n_tokens) const {
    return static_cast<int32_t>((n_tokens + block_size_ - 1) / block_size_);
  }
  int32_t null_id() const { return null_block_ ? null_block_->id : -1; }

  int32_t window_;
  int32_t block_size_;
  BlockPool pool_;
  KvBlock* null_block_ = nullptr;
  std::unordered_map<int64_t, SeqBlocks> tables_;
  int64_t window_released_ = 0;
};

}  // namespace loom
