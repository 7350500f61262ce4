#include "kv/block_pool.h"

#include "base/status.h"

namespace loom {

BlockPool::BlockPool(int32_t num_blocks, bool enable_caching)
    : enable_caching_(enable_caching), blocks_(num_blocks) {
  head_.next_free = head_.prev_free = &head_;
  for (int32_t i = 0; i < num_blocks; ++i) {
    blocks_[i].id = i;
    push_tail(&blocks_[i]);
  }
}

double BlockPool::usage() const {
  if (blocks_.empty()) return 0.0;
  return 1.0 - static_cast<double>(num_free_) / static_cast<double>(blocks_.size());
}

void BlockPool::push_head(KvBlock* b) {
  b->prev_free = &head_;
  b->next_free = head_.next_free;
  head_.next_free->prev_free = b;
  head_.next_free = b;
  b->on_free_list = true;
  ++num_free_;
}

void BlockPool::push_tail(KvBlock* b) {
  b->next_free = &head_;
  b->prev_free = head_.prev_free;
  head_.prev_free->next_free = b;
  head_.prev_free = b;
  b->on_free_list = true;
  ++num_free_;
}

void BlockPool::unlink(KvBlock* b) {
  LOOM_CHECK(b->on_free_list);
  b->prev_free->next_free = b->next_free;
  b->next_free->prev_free = b->prev_free;
  b->prev_free = b->next_free = nullptr;
  b->on_free_list = false;
  --num_free_;
}

void BlockPool::evict_hash(KvBlock* b) {
  if (!b->hash) return;
  auto it = cached_.find(*b->hash);
  if (it != cached_.end() && it->second == b) cached_.erase(it);
  b->hash.reset();
}

std::vector<KvBlock*> BlockPool::allocate(int32_t n) {
  std::vector<KvBlock*> out;
  if (n <= 0 || n > num_free_) return out;
  out.reserve(n);
  for (int32_t i = 0; i < n; ++i) {
    KvBlock* b = head_.next_free;
    unlink(b);
    evict_hash(b);
    LOOM_CHECK(b->ref_count == 0);
    b->ref_count = 1;
    out.push_back(b);
  }
  return out;
}

KvBlock* BlockPool::lookup(const BlockHash& hash) const {
  if (!enable_caching_) return nullptr;
  auto it = cached_.find(hash);
  return it == cached_.end() ? nullptr : it->second;
}

void BlockPool::touch(std::span<KvBlock* const> blocks) {
  for (KvBlock* b : blocks) {
    if (b->ref_count == 0) unlink(b);
    ++b->ref_count;
  }
}

void BlockPool::cache(KvBlock* block, const BlockHash& hash) {
  if (!enable_caching_ || block->hash) return;
  auto [it, inserted] = cached_.emplace(hash, block);
  if (inserted) block->hash = hash;
}

void BlockPool::release(std::span<KvBlock* const> blocks) {
  for (KvBlock* b : blocks) {
    LOOM_CHECK(b->ref_count > 0);
    if (--b->ref_count > 0) continue;
    if (b->hash)
      push_tail(b);
    else
      push_head(b);
  }
}

KvBlock* BlockPool::reserve_block() {
  std::vector<KvBlock*> b = allocate(1);
  LOOM_CHECK(b.size() == 1);
  ++num_reserved_;
  return b[0];
}

bool BlockPool::reset_prefix_cache() {
  if (num_free_ != num_blocks() - num_reserved_) return false;
  for (KvBlock& b : blocks_) b.hash.reset();
  cached_.clear();
  return true;
}

std::vector<int32_t> BlockPool::free_list_ids() const {
  std::vector<int32_t> ids;
  for (const KvBlock* b = head_.next_free; b != &head_; b = b->next_free) ids.push_back(b->id);
  return ids;
}

std::string BlockPool::check_invariants() const {
  int32_t listed = 0;
  const KvBlock* prev = &head_;
  for (const KvBlock* b = head_.next_free; b != &head_; b = b->next_free) {
    if (b->prev_free != prev) return "free list back link broken at block " + std::to_string(b->id);
    if (b->ref_count != 0) return "block " + std::to_string(b->id) + " on free list with refs";
    if (!b->on_free_list) return "block " + std::to_string(b->id) + " listed but not flagged";
    if (++listed > num_blocks()) return "free list has a cycle";
    prev = b;
  }
  if (listed != num_free_)
    return "num_free " + std::to_string(num_free_) + " != listed " + std::to_string(listed);
  for (const KvBlock& b : blocks_) {
    if (b.ref_count < 0) return "negative ref count on block " + std::to_string(b.id);
    if ((b.ref_count == 0) != b.on_free_list)
      return "block " + std::to_string(b.id) + " free flag disagrees with ref count";
    if (b.hash) {
      auto it = cached_.find(*b.hash);
      if (it == cached_.end() || it->second != &b)
        return "block " + std::to_string(b.id) + " has a hash the map does not point back to";
    }
  }
  for (const auto& [h, b] : cached_)
    if (!b->hash || !(*b->hash == h)) return "hash map entry points at a block without it";
  return "";
}

}  // namespace loom
