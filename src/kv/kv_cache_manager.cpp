#include "kv/kv_cache_manager.h"

#include <algorithm>

#include "base/status.h"

namespace loom {

KvCacheManager::KvCacheManager(int32_t num_blocks, int32_t block_size, bool enable_caching)
    : block_size_(block_size), pool_(num_blocks, enable_caching) {
  LOOM_CHECK(block_size > 0 && num_blocks >= 0);
}

int32_t KvCacheManager::blocks_for(int64_t n_tokens) const {
  return static_cast<int32_t>((n_tokens + block_size_ - 1) / block_size_);
}

CachedPrefix KvCacheManager::find_cached_prefix(std::span<const int32_t> tokens, uint64_t salt) {
  CachedPrefix out;
  if (!pool_.caching_enabled() || tokens.empty()) return out;
  const int64_t max_blocks = (static_cast<int64_t>(tokens.size()) - 1) / block_size_;
  const BlockHash* parent = nullptr;
  BlockHash h;
  for (int64_t i = 0; i < max_blocks; ++i) {
    h = hash_block(parent, tokens.subspan(i * block_size_, block_size_), salt);
    KvBlock* b = pool_.lookup(h);
    if (!b) break;
    out.blocks.push_back(b);
    parent = &h;
  }
  out.num_tokens = static_cast<int32_t>(out.blocks.size()) * block_size_;
  return out;
}

std::optional<SlotAllocation> KvCacheManager::allocate_slots(int64_t seq,
                                                             std::span<const int32_t> tokens,
                                                             int32_t num_computed, int32_t num_new,
                                                             uint64_t salt,
                                                             const CachedPrefix* prefix) {
  LOOM_CHECK(num_new >= 0 && static_cast<int64_t>(num_computed) + num_new <=
                                 static_cast<int64_t>(tokens.size()));
  auto it = tables_.find(seq);
  const int32_t have = it == tables_.end() ? 0 : static_cast<int32_t>(it->second.blocks.size());
  const int32_t n_prefix = prefix ? static_cast<int32_t>(prefix->blocks.size()) : 0;
  LOOM_CHECK(n_prefix == 0 || have == 0);
  const int32_t need = std::max(0, blocks_for(num_computed + num_new) - have - n_prefix);
  // Cached prefix blocks nobody uses sit on the free list: taking them uses up free capacity.
  int32_t prefix_from_free = 0;
  if (prefix)
    for (const KvBlock* b : prefix->blocks) prefix_from_free += b->ref_count == 0;
  if (need + prefix_from_free > pool_.num_free_blocks()) return std::nullopt;

  SeqBlocks& s = tables_[seq];
  if (prefix && n_prefix > 0) {
    pool_.touch(prefix->blocks);
    for (KvBlock* b : prefix->blocks) {
      s.blocks.push_back(b);
      s.ids.push_back(b->id);
      s.hashes.push_back(*b->hash);
    }
  }
  SlotAllocation out;
  for (KvBlock* b : pool_.allocate(need)) {
    s.blocks.push_back(b);
    s.ids.push_back(b->id);
    out.new_block_ids.push_back(b->id);
  }
  // Blocks that will be full once this step runs can be found by later requests from now on:
  // their tokens are known and the K/V are written before any later step reads them.
  cache_full_blocks(s, tokens, (num_computed + num_new) / block_size_, salt);
  return out;
}

void KvCacheManager::cache_full_blocks(SeqBlocks& s, std::span<const int32_t> tokens,
                                       int32_t num_full, uint64_t salt) {
  if (!pool_.caching_enabled()) return;
  for (int32_t i = static_cast<int32_t>(s.hashes.size()); i < num_full; ++i) {
    const BlockHash* parent = i == 0 ? nullptr : &s.hashes[i - 1];
    BlockHash h = hash_block(parent, tokens.subspan(static_cast<size_t>(i) * block_size_,
                                                    block_size_), salt);
    s.hashes.push_back(h);
    pool_.cache(s.blocks[i], h);
  }
}

void KvCacheManager::fork(int64_t parent, int64_t child, int32_t n_blocks) {
  LOOM_CHECK(!tables_.count(child));
  if (n_blocks <= 0) return;
  const SeqBlocks& p = tables_.at(parent);
  LOOM_CHECK(n_blocks <= static_cast<int32_t>(p.blocks.size()));
  SeqBlocks c;
  c.blocks.assign(p.blocks.begin(), p.blocks.begin() + n_blocks);
  c.ids.assign(p.ids.begin(), p.ids.begin() + n_blocks);
  c.hashes.assign(p.hashes.begin(),
                  p.hashes.begin() + std::min<size_t>(n_blocks, p.hashes.size()));
  pool_.touch(c.blocks);
  tables_.emplace(child, std::move(c));
}

void KvCacheManager::free(int64_t seq) {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return;
  std::vector<KvBlock*>& blocks = it->second.blocks;
  std::reverse(blocks.begin(), blocks.end());  // tail blocks become the first to be evicted
  pool_.release(blocks);
  tables_.erase(it);
}

const std::vector<int32_t>& KvCacheManager::block_table(int64_t seq) const {
  static const std::vector<int32_t> kEmpty;
  auto it = tables_.find(seq);
  return it == tables_.end() ? kEmpty : it->second.ids;
}

void KvCacheManager::record_prefix_query(int64_t queried_tokens, int64_t hit_tokens) {
  prefix_queries_ += queried_tokens;
  prefix_hits_ += hit_tokens;
}

}  // namespace loom
