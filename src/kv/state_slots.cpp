#include "kv/state_slots.h"

#include "base/status.h"

namespace loom {

StateSlots::StateSlots(int32_t num_slots, int32_t max_snapshots)
    : max_snapshots_(max_snapshots), is_free_(num_slots, true) {
  LOOM_CHECK(num_slots >= 0 && max_snapshots >= 0);
  for (int32_t s = num_slots - 1; s >= 0; --s) free_.push_back(s);
}

int32_t StateSlots::take_free() {
  if (free_.empty()) return -1;
  const int32_t s = free_.back();
  free_.pop_back();
  is_free_[s] = false;
  return s;
}

int32_t StateSlots::evict_lru(int32_t keep) {
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    auto snap = snapshots_.find(*it);
    const int32_t slot = snap->second.slot;
    if (slot == keep) continue;
    snapshots_.erase(snap);
    lru_.erase(it);
    ++evicted_;
    return slot;  // handed on as taken: never back on the free list in between
  }
  return -1;
}

int32_t StateSlots::acquire(int64_t seq, int32_t keep) {
  if (auto it = live_.find(seq); it != live_.end()) return it->second;
  int32_t s = take_free();
  if (s < 0) s = evict_lru(keep);
  if (s >= 0) live_.emplace(seq, s);
  return s;
}

int32_t StateSlots::slot_of(int64_t seq) const {
  auto it = live_.find(seq);
  return it == live_.end() ? -1 : it->second;
}

void StateSlots::release(int64_t seq) {
  auto it = live_.find(seq);
  if (it == live_.end()) return;
  free_.push_back(it->second);
  is_free_[it->second] = true;
  live_.erase(it);
}

int32_t StateSlots::find_snapshot(const BlockHash& h) {
  auto it = snapshots_.find(h);
  if (it == snapshots_.end()) return -1;
  lru_.splice(lru_.end(), lru_, it->second.lru);
  return it->second.slot;
}

int32_t StateSlots::add_snapshot(const BlockHash& h) {
  if (max_snapshots_ == 0 || snapshots_.count(h)) return -1;
  int32_t s = num_snapshots() >= max_snapshots_ ? evict_lru(-1) : take_free();
  if (s < 0) s = evict_lru(-1);
  if (s < 0) return -1;
  lru_.push_back(h);
  snapshots_.emplace(h, Snapshot{s, std::prev(lru_.end())});
  ++taken_;
  return s;
}

void StateSlots::drop_snapshot(const BlockHash& h) {
  auto it = snapshots_.find(h);
  if (it == snapshots_.end()) return;
  free_.push_back(it->second.slot);
  is_free_[it->second.slot] = true;
  lru_.erase(it->second.lru);
  snapshots_.erase(it);
}

void StateSlots::clear_snapshots() {
  while (!lru_.empty()) drop_snapshot(lru_.front());
}

std::string StateSlots::check_invariants() const {
  std::vector<int> uses(is_free_.size(), 0);
  for (int32_t s : free_) {
    if (!is_free_[s]) return "slot " + std::to_string(s) + " on the free list but marked used";
    ++uses[s];
  }
  for (const auto& [seq, s] : live_) ++uses[s];
  for (const auto& [h, snap] : snapshots_) ++uses[snap.slot];
  for (size_t s = 0; s < uses.size(); ++s)
    if (uses[s] != 1)
      return "state slot " + std::to_string(s) + " has " + std::to_string(uses[s]) +
             " owners (free list, live sequences, snapshots)";
  if (lru_.size() != snapshots_.size()) return "snapshot LRU list out of step";
  if (num_snapshots() > max_snapshots_) return "more snapshots than the budget";
  return "";
}

}  // namespace loom
