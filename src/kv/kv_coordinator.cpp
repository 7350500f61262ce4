#include "kv/kv_coordinator.h"

#include <algorithm>
#include <string>

#include "base/status.h"

namespace loom {

KvCoordinator::KvCoordinator(const std::vector<KvGroupConfig>& groups, int32_t block_size,
                             bool enable_caching, const StateGroupConfig& states)
    : block_size_(block_size),
      caching_(enable_caching),
      states_(states.num_slots, enable_caching ? states.max_snapshots : 0),
      snapshot_every_(std::max(1, states.snapshot_every_blocks)) {
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
  // Not for hybrids: they resume at state snapshots, which a block less would mostly miss
  // (one stale module entry costs less than recomputing back to the snapshot before).
  if (!hits_keep_last_block_ && !recurrent() && hit > 0) --hit;
  // A hybrid resumes from a state snapshot: the deepest one within the blocks' hit.
  if (recurrent()) {
    while (hit > 0 && (out.state_slot = states_.find_snapshot(hashes[hit - 1])) < 0) --hit;
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
  if (recurrent() && states_.slot_of(seq) < 0) {
    const bool resumes = prefix && prefix->num_tokens > 0;
    LOOM_CHECK(!resumes || prefix->state_slot >= 0);
    const int32_t slot = states_.acquire(seq, resumes ? prefix->state_slot : -1);
    if (slot < 0) return false;
    if (resumes) restores_.push_back({prefix->state_slot, slot});
  }
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
  if (recurrent()) return false;
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
  states_.release(seq);
  newest_snapshot_.erase(seq);  // the snapshot stays cached: the end of a finished turn
}

std::vector<StateRestore> KvCoordinator::take_state_restores() {
  std::vector<StateRestore> out;
  out.swap(restores_);
  return out;
}

void KvCoordinator::plan_snapshots(int64_t seq, int32_t num_computed, int32_t num_new,
                                   int32_t num_tokens, std::vector<PlannedSnapshot>& out) {
  if (!recurrent() || !caching_ || states_.max_snapshots() == 0) return;
  const std::vector<BlockHash>& hashes = seqs_.at(seq);
  const int64_t first = num_computed / block_size_ + 1;  // block boundaries in the step
  const int64_t last =
      std::min<int64_t>((static_cast<int64_t>(num_computed) + num_new) / block_size_,
                        static_cast<int64_t>(hashes.size()));
  const int64_t prompt_end = (static_cast<int64_t>(num_tokens) - 1) / block_size_;
  for (int64_t b = first; b <= last; ++b) {
    const bool on_grid = b % snapshot_every_ == 0 || b == prompt_end;
    if (!on_grid && b != last) continue;
    const BlockHash& h = hashes[b - 1];
    const int32_t slot = states_.add_snapshot(h);
    if (slot < 0) continue;  // taken before (a shared prefix), or no room
    out.push_back({static_cast<int32_t>(b * block_size_), slot, h});
    if (on_grid) continue;
    // One newest snapshot per sequence off the grid: its previous one is superseded.
    auto [it, inserted] = newest_snapshot_.try_emplace(seq, h);
    if (!inserted) {
      states_.drop_snapshot(it->second);
      it->second = h;
    }
  }
}

void KvCoordinator::plan_draft_snapshots(int64_t seq, std::span<const int32_t> tokens,
                                         std::span<const int32_t> draft, uint64_t salt,
                                         std::vector<PlannedSnapshot>& out) {
  if (!recurrent() || !caching_ || states_.max_snapshots() == 0 || draft.empty()) return;
  const std::vector<BlockHash>& known = seqs_.at(seq);
  const int64_t n_known = static_cast<int64_t>(tokens.size());
  const int64_t first = n_known / block_size_ + 1;  // boundaries after the known tokens
  const int64_t last = (n_known + static_cast<int64_t>(draft.size())) / block_size_;
  if (first > last) return;
  // The chain up to block first - 2 is the known blocks'; each block from there holds known
  // tokens then proposals, or proposals only.
  LOOM_CHECK(static_cast<int64_t>(known.size()) >= first - 2);
  std::vector<int32_t>& block = draft_block_;
  block.resize(block_size_);
  BlockHash prev = first >= 2 ? known[first - 2] : BlockHash{};
  for (int64_t b = first; b <= last; ++b) {
    for (int64_t i = 0; i < block_size_; ++i) {
      const int64_t p = (b - 1) * block_size_ + i;
      block[i] = p < n_known ? tokens[p] : draft[p - n_known];
    }
    const BlockHash h = hash_block(b >= 2 ? &prev : nullptr, block, salt);
    prev = h;
    const int32_t slot = states_.add_snapshot(h);
    if (slot < 0) continue;  // taken before (a shared prefix), or no room
    out.push_back({static_cast<int32_t>(b * block_size_), slot, h, /*provisional=*/true});
  }
}

void KvCoordinator::settle_snapshot(int64_t seq, const PlannedSnapshot& snap, bool kept,
                                    bool last_kept) {
  if (!kept) {
    states_.drop_snapshot(snap.hash);
    return;
  }
  const int64_t b = snap.n_tokens / block_size_;
  if (b % snapshot_every_ == 0) return;  // on the grid: kept as plan_snapshots keeps those
  if (!last_kept) {  // an earlier boundary of the same verify: the later one is the newest
    states_.drop_snapshot(snap.hash);
    return;
  }
  auto [it, inserted] = newest_snapshot_.try_emplace(seq, snap.hash);
  if (!inserted) {
    states_.drop_snapshot(it->second);
    it->second = snap.hash;
  }
}

void KvCoordinator::drop_snapshots(std::span<const PlannedSnapshot> snaps) {
  for (const PlannedSnapshot& s : snaps) states_.drop_snapshot(s.hash);
}

void KvCoordinator::record_prefix_query(int64_t queried_tokens, int64_t hit_tokens) {
  prefix_queries_ += queried_tokens;
  prefix_hits_ += hit_tokens;
}

bool KvCoordinator::reset_prefix_cache() {
  for (const auto& g : groups_)
    if (g->num_used_blocks() != 0) return false;
  for (auto& g : groups_) g->reset_prefix_cache();
  states_.clear_snapshots();
  newest_snapshot_.clear();
  return true;
}

std::string KvCoordinator::check_invariants() const {
  for (size_t g = 0; g < groups_.size(); ++g) {
    std::string err = groups_[g]->check_invariants();
    if (!err.empty()) return "KV group " + std::to_string(g) + ": " + err;
  }
  if (std::string err = states_.check_invariants(); !err.empty()) return "state slots: " + err;
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
  if (states_.num_live() != 0)
    return std::to_string(states_.num_live()) + " recurrent state slots still in use";
  return "";
}

}  // namespace loom
