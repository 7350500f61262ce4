#include "kv/kv_coordinator.h"

#include <algorithm>
#include <string>

#include "base/status.h"

namespace loom {

KvCoordinator::KvCoordinator(const std::vector<KvGroupConfig>& groups, int32_t block_size,
                             bool enable_caching)
    : block_size_(block_size), caching_(enable_caching) {
  LOOM_CHECK(block_size > 0 && !groups.empty());
  for (const KvGroupConfig& g : groups) {
    groups_.push_back(
        std::make_unique<KvGroupManager>(g.window, g.num_blocks, block_size, enable_caching));
    group_layers_.push_back(g.n_layers);
  }
}

int32_t KvCoordinator::num_blocks() const {
  int32_t n = 0;
  for (const auto& g : groups_) n = std::max(n, g->num_blocks());
  return n;
}

double KvCoordinator::usage() const {
  double used = 0, total = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    used += static_cast<double>(groups_[g]->num_used_blocks()) * group_layers_[g];
    total += static_cast<double>(groups_[g]->num_blocks()) * group_layers_[g];
  }
  return total > 0 ? used / total : 0.0;
}

int32_t KvCoordinator::blocks_for(int64_t n_tokens) const {
  return static_cast<int32_t>((n_tokens + block_size_ - 1) / block_size_);
}

bool KvCoordinator::fits(int64_t n_tokens, int32_t max_step) const {
  for (const auto& g : groups_)
    if (g->peak_blocks(n_tokens, max_step) > g->num_blocks()) return false;
  return true;
}

CachedPrefix KvCoordinator::find_cached_prefix(std::span<const int32_t> tokens, uint64_t salt) {
  CachedPrefix out;
  out.blocks.resize(groups_.size());
  if (!caching_ || tokens.empty()) return out;
  const int32_t max_blocks = static_cast<int32_t>((tokens.size() - 1) / block_size_);
  // Hash the candidate blocks; a full-attention group needs every block of a hit, so hashing
  // stops at its first miss.
  const KvGroupManager* full = nullptr;
  for (const auto& g : groups_)
    if (g->window() == 0) full = g.get();
  std::vector<BlockHash>& hashes = out.hashes;
  for (int32_t i = 0; i < max_blocks; ++i) {
    hashes.push_back(hash_block(i == 0 ? nullptr : &hashes[i - 1],
                                tokens.subspan(static_cast<size_t>(i) * block_size_, block_size_),
                                salt));
    if (full && !full->pool().lookup(hashes.back())) break;
  }
  // Each group's longest hit within the others': a shorter hit is still a hit for a
  // full-attention group, and a window only asks for the blocks before the hit's end.
  int32_t hit = static_cast<int32_t>(hashes.size());
  for (bool shrunk = true; shrunk && hit > 0;) {
    shrunk = false;
    for (const auto& g : groups_) {
      const int32_t h = g->longest_hit(hashes, hit);
      if (h < hit) hit = h, shrunk = true;
    }
  }
  hashes.resize(hit);
  for (size_t g = 0; g < groups_.size(); ++g) out.blocks[g] = groups_[g]->hit_blocks(hashes, hit);
  out.num_tokens = hit * block_size_;
  return out;
}

bool KvCoordinator::allocate_slots(int64_t seq, std::span<const int32_t> tokens,
                                   int32_t num_computed, int32_t num_new, uint64_t salt,
                                   const CachedPrefix* prefix, int32_t num_lookahead) {
  LOOM_CHECK(num_new >= 0 &&
             static_cast<int64_t>(num_computed) + num_new <= static_cast<int64_t>(tokens.size()));
  LOOM_CHECK(!prefix || prefix->blocks.size() == groups_.size());
  LOOM_CHECK(num_lookahead >= 0);
  const int64_t n = static_cast<int64_t>(num_computed) + num_new;
  const int64_t n_slots = n + num_lookahead;
  auto prefix_of = [&](size_t g) {
    return prefix ? std::span<KvBlock* const>(prefix->blocks[g]) : std::span<KvBlock* const>();
  };
  // Blocks no query from here on reads go first: whether or not this step fits, the sequence
  // never needs them again.
  for (auto& g : groups_) g->release_outside_window(seq, num_computed);
  for (size_t g = 0; g < groups_.size(); ++g)
    if (groups_[g]->blocks_to_take(seq, n_slots, prefix_of(g)) > groups_[g]->num_free_blocks())
      return false;
  for (size_t g = 0; g < groups_.size(); ++g) groups_[g]->grow(seq, n_slots, prefix_of(g));

  std::vector<BlockHash>& hashes = seqs_[seq];
  if (prefix && hashes.empty()) hashes = prefix->hashes;
  if (!caching_) return true;
  // Blocks that will be full once this step runs can be found by later requests from now on:
  // their tokens are known and the K/V are written before any later step reads them.
  const int32_t from = static_cast<int32_t>(hashes.size());
  for (int64_t i = from; i < n / block_size_; ++i)
    hashes.push_back(hash_block(i == 0 ? nullptr : &hashes[i - 1],
                                tokens.subspan(static_cast<size_t>(i) * block_size_, block_size_),
                                salt));
  for (auto& g : groups_) g->cache_blocks(seq, hashes, from);
  return true;
}

void KvCoordinator::truncate(int64_t seq, int64_t n_tokens) {
  for (auto& g : groups_) g->shrink(seq, n_tokens);
}

bool KvCoordinator::fork(int64_t parent, int64_t child, int32_t n_blocks) {
  LOOM_CHECK(!seqs_.count(child));
  if (n_blocks <= 0) return true;
  for (const auto& g : groups_)
    if (!g->can_fork(parent, n_blocks)) return false;
  for (auto& g : groups_) g->fork(parent, child, n_blocks);
  const std::vector<BlockHash>& p = seqs_.at(parent);
  seqs_[child].assign(p.begin(), p.begin() + std::min<size_t>(n_blocks, p.size()));
  return true;
}

void KvCoordinator::free(int64_t seq) {
  for (auto& g : groups_) g->free(seq);
  seqs_.erase(seq);
}

void KvCoordinator::record_prefix_query(int64_t queried_tokens, int64_t hit_tokens) {
  prefix_queries_ += queried_tokens;
  prefix_hits_ += hit_tokens;
}

bool KvCoordinator::reset_prefix_cache() {
  for (const auto& g : groups_)
    if (g->num_used_blocks() != 0) return false;
  for (auto& g : groups_) g->reset_prefix_cache();
  return true;
}

std::string KvCoordinator::check_invariants() const {
  for (size_t g = 0; g < groups_.size(); ++g) {
    std::string err = groups_[g]->check_invariants();
    if (!err.empty()) return "KV group " + std::to_string(g) + ": " + err;
  }
  return "";
}

std::string KvCoordinator::check_drained() const {
  std::string err = check_invariants();
  if (!err.empty()) return err;
  for (size_t g = 0; g < groups_.size(); ++g)
    if (groups_[g]->num_used_blocks() != 0)
      return std::to_string(groups_[g]->num_used_blocks()) + " KV blocks of group " +
             std::to_string(g) + " still in use";
  if (!seqs_.empty())
    return std::to_string(seqs_.size()) + " sequences still in use (with KV tables)";
  return "";
}

}  // namespace loom
