#include "kv/kv_group_manager.h"

#include <algorithm>

#include "base/status.h"

namespace loom {

KvGroupManager::KvGroupManager(int32_t window, int32_t num_blocks, int32_t block_size,
                               bool enable_caching)
    : window_(window),
      block_size_(block_size),
      pool_(num_blocks + (window > 0 ? 1 : 0), enable_caching) {
  LOOM_CHECK(window >= 0 && block_size > 0 && num_blocks >= 0);
  if (window > 0) null_block_ = pool_.reserve_block();
}

int32_t KvGroupManager::first_live_block(int64_t num_computed) const {
  if (window_ == 0) return 0;
  return static_cast<int32_t>(std::max<int64_t>(0, num_computed - window_ + 1) / block_size_);
}

int32_t KvGroupManager::peak_blocks(int64_t n_tokens, int32_t max_step) const {
  if (window_ == 0) return blocks_for(n_tokens);
  // A step computing tokens [a, a + s) holds blocks first_live_block(a) .. (a + s - 1) / bs.
  const int64_t s = std::min<int64_t>(n_tokens, std::max(max_step, 1));
  return std::min(blocks_for(n_tokens), blocks_for(s + window_ - 1) + 1);
}

int32_t KvGroupManager::longest_hit(std::span<const BlockHash> hashes, int32_t max_blocks) const {
  if (!pool_.caching_enabled()) return 0;
  const int32_t n = std::min<int32_t>(max_blocks, static_cast<int32_t>(hashes.size()));
  if (window_ == 0) {
    int32_t hit = 0;
    while (hit < n && pool_.lookup(hashes[hit])) ++hit;
    return hit;
  }
  // run[i]: cached blocks in a row ending at block i. A hit of h blocks needs blocks
  // [first_live_block(h * bs), h), the window before position h * bs.
  std::vector<int32_t> run(n);
  for (int32_t i = 0; i < n; ++i)
    run[i] = pool_.lookup(hashes[i]) ? (i > 0 ? run[i - 1] : 0) + 1 : 0;
  for (int32_t h = n; h > 0; --h) {
    const int32_t need = h - first_live_block(static_cast<int64_t>(h) * block_size_);
    if (need == 0 || run[h - 1] >= need) return h;
  }
  return 0;
}

std::vector<KvBlock*> KvGroupManager::hit_blocks(std::span<const BlockHash> hashes,
                                                 int32_t n) const {
  std::vector<KvBlock*> out(n, nullptr);
  for (int32_t i = first_live_block(static_cast<int64_t>(n) * block_size_); i < n; ++i) {
    out[i] = pool_.lookup(hashes[i]);
    LOOM_CHECK(out[i] != nullptr);
  }
  return out;
}

void KvGroupManager::release_outside_window(int64_t seq, int64_t num_computed) {
  if (window_ == 0) return;
  auto it = tables_.find(seq);
  if (it == tables_.end()) return;
  SeqBlocks& s = it->second;
  const int32_t end =
      std::min(first_live_block(num_computed), static_cast<int32_t>(s.blocks.size()));
  std::vector<KvBlock*> gone;
  for (; s.num_released < end; ++s.num_released) {
    KvBlock*& b = s.blocks[s.num_released];
    if (!b) continue;  // came from a prefix hit that did not need it
    gone.push_back(b);
    b = nullptr;
    s.ids[s.num_released] = null_id();
  }
  // Oldest first: of these, the earliest block is evicted first.
  pool_.release(gone);
  window_released_ += static_cast<int64_t>(gone.size());
}

int32_t KvGroupManager::blocks_to_take(int64_t seq, int64_t n_tokens,
                                       std::span<KvBlock* const> prefix) const {
  auto it = tables_.find(seq);
  const int32_t have = it == tables_.end() ? 0 : static_cast<int32_t>(it->second.blocks.size());
  LOOM_CHECK(prefix.empty() || have == 0);
  int32_t take = std::max(0, blocks_for(n_tokens) - have - static_cast<int32_t>(prefix.size()));
  for (const KvBlock* b : prefix) take += b && b->ref_count == 0;
  return take;
}

void KvGroupManager::grow(int64_t seq, int64_t n_tokens, std::span<KvBlock* const> prefix) {
  SeqBlocks& s = tables_[seq];
  for (KvBlock* b : prefix) {
    if (b) pool_.touch({&b, 1});
    s.blocks.push_back(b);
    s.ids.push_back(b ? b->id : null_id());
  }
  while (s.num_released < static_cast<int32_t>(s.blocks.size()) && !s.blocks[s.num_released])
    ++s.num_released;
  const int32_t need = blocks_for(n_tokens) - static_cast<int32_t>(s.blocks.size());
  if (need <= 0) return;
  std::vector<KvBlock*> fresh = pool_.allocate(need);
  LOOM_CHECK(static_cast<int32_t>(fresh.size()) == need);
  for (KvBlock* b : fresh) {
    s.blocks.push_back(b);
    s.ids.push_back(b->id);
  }
}

void KvGroupManager::shrink(int64_t seq, int64_t n_tokens) {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return;
  SeqBlocks& s = it->second;
  const size_t keep = static_cast<size_t>(blocks_for(n_tokens));
  if (s.blocks.size() <= keep) return;
  std::vector<KvBlock*> dropped;
  for (size_t i = s.blocks.size(); i-- > keep;)  // last first, as free() does
    if (s.blocks[i]) dropped.push_back(s.blocks[i]);
  pool_.release(dropped);
  s.blocks.resize(keep);
  s.ids.resize(keep);
  s.num_released = std::min(s.num_released, static_cast<int32_t>(keep));
}

void KvGroupManager::cache_blocks(int64_t seq, std::span<const BlockHash> hashes, int32_t from) {
  if (!pool_.caching_enabled()) return;
  SeqBlocks& s = tables_.at(seq);
  LOOM_CHECK(hashes.size() <= s.blocks.size());
  for (size_t i = static_cast<size_t>(from); i < hashes.size(); ++i)
    if (s.blocks[i]) pool_.cache(s.blocks[i], hashes[i]);
}

bool KvGroupManager::can_fork(int64_t parent, int32_t n_blocks) const {
  const SeqBlocks& p = tables_.at(parent);
  if (n_blocks > static_cast<int32_t>(p.blocks.size())) return false;
  for (int32_t i = first_live_block(static_cast<int64_t>(n_blocks) * block_size_); i < n_blocks;
       ++i)
    if (!p.blocks[i]) return false;
  return true;
}

void KvGroupManager::fork(int64_t parent, int64_t child, int32_t n_blocks) {
  LOOM_CHECK(!tables_.count(child) && can_fork(parent, n_blocks));
  const SeqBlocks& p = tables_.at(parent);
  SeqBlocks c;
  c.blocks.assign(p.blocks.begin(), p.blocks.begin() + n_blocks);
  c.ids.assign(p.ids.begin(), p.ids.begin() + n_blocks);
  c.num_released = std::min(p.num_released, n_blocks);
  for (KvBlock* b : c.blocks)
    if (b) pool_.touch({&b, 1});
  tables_.emplace(child, std::move(c));
}

void KvGroupManager::free(int64_t seq) {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return;
  std::vector<KvBlock*> held;
  const std::vector<KvBlock*>& blocks = it->second.blocks;
  for (auto b = blocks.rbegin(); b != blocks.rend(); ++b)  // tail blocks evicted first
    if (*b) held.push_back(*b);
  pool_.release(held);
  tables_.erase(it);
}

const std::vector<int32_t>& KvGroupManager::block_table(int64_t seq) const {
  static const std::vector<int32_t> kEmpty;
  auto it = tables_.find(seq);
  return it == tables_.end() ? kEmpty : it->second.ids;
}

std::string KvGroupManager::check_invariants() const {
  std::string err = pool_.check_invariants();
  if (!err.empty()) return err;
  if (null_block_ && (null_block_->ref_count != 1 || null_block_->on_free_list))
    return "the null block of a sliding-window group was handed out or freed";
  return "";
}

}  // namespace loom
