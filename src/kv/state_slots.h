// StateSlots: the recurrent layer group of a hybrid model (DESIGN.md "KV storage"). A Gated
// DeltaNet layer keeps no K/V per token but one fixed-size state per sequence, which cannot be
// cut at an arbitrary token the way a block table can. So the group is a pool of state slots
// (each holding every recurrent layer's state, backend/cpu/kv_storage.h): one live slot per
// running sequence, and prefix snapshots — the state of a prefix at a block boundary, keyed by
// that block's chain hash, the same key the KV blocks of the prefix have — which a later request
// sharing the prefix copies into its own live slot to resume from there.
//
// Live slots come first: a sequence that needs one takes a free slot, else evicts the least
// recently used snapshot. Snapshots are bounded by max_snapshots (their memory budget) and
// evicted least recently used first.
#pragma once

#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"

namespace loom {

class StateSlots {
 public:
  StateSlots(int32_t num_slots, int32_t max_snapshots);

  int32_t num_slots() const { return static_cast<int32_t>(is_free_.size()); }
  int32_t num_live() const { return static_cast<int32_t>(live_.size()); }
  int32_t num_snapshots() const { return static_cast<int32_t>(snapshots_.size()); }
  int32_t max_snapshots() const { return max_snapshots_; }

  // The live slot of `seq`, assigned on the first call: a free slot, else the least recently
  // used snapshot's (never `keep`'s, the snapshot this sequence is about to resume from).
  // -1 when neither exists (every slot is live, or the only snapshot is `keep`).
  int32_t acquire(int64_t seq, int32_t keep = -1);
  int32_t slot_of(int64_t seq) const;  // -1 when it has none
  void release(int64_t seq);           // no-op for a sequence without a slot

  // The slot of the snapshot of the prefix ending with the block hashed `h` (-1: none); a
  // found snapshot becomes the most recently used.
  int32_t find_snapshot(const BlockHash& h);
  // Registers a snapshot of that prefix and returns the slot to write it into, evicting the
  // least recently used snapshot when the budget or the free slots run out; -1 when the prefix
  // has one already or no slot can be had.
  int32_t add_snapshot(const BlockHash& h);
  void drop_snapshot(const BlockHash& h);  // no-op when absent
  void clear_snapshots();
  // Snapshots registered since start-up, and evicted to make room.
  int64_t num_snapshots_taken() const { return taken_; }
  int64_t num_snapshots_evicted() const { return evicted_; }

  // Every slot free, live or a snapshot, exactly once; "" when fine.
  std::string check_invariants() const;

 private:
  int32_t take_free();
  int32_t evict_lru(int32_t keep);  // frees the LRU snapshot other than `keep`'s; its slot or -1

  struct Snapshot {
    int32_t slot;
    std::list<BlockHash>::iterator lru;  // position in lru_ (front: least recently used)
  };
  int32_t max_snapshots_;
  std::vector<int32_t> free_;  // stack of free slots
  std::vector<bool> is_free_;
  std::unordered_map<int64_t, int32_t> live_;
  std::unordered_map<BlockHash, Snapshot, BlockHashHasher> snapshots_;
  std::list<BlockHash> lru_;
  int64_t taken_ = 0;
  int64_t evicted_ = 0;
};

}  // namespace loom
