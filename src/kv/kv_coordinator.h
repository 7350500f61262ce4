// KvCoordinator: the KV cache's bookkeeping as the scheduler sees it. Layers are grouped by what
// they cache (full attention, one sliding window each, MLA latent rows); each group has its own
// KvGroupManager (its own pool and block tables, DESIGN.md "KV storage"), and the coordinator keeps
// them in step: one sequence has a table in every group, with the same number of entries; room for
// a step's new tokens is found in every group or in none ("no space" changes nothing, so the
// scheduler can preempt and try again); a prefix-cache hit is the longest prefix every group
// can serve; block hashes are computed once per sequence and shared by the groups.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/kv_group_manager.h"
#include "kv/state_slots.h"

namespace loom {

struct KvGroupConfig {
  int32_t window = 0;      // 0: full attention
  int32_t num_blocks = 0;  // blocks sequences can use
  int32_t n_layers = 1;    // layers in the group: weighs its blocks in usage()
  // Multi-head Latent Attention layers: each token is one latent row (not K and V per head);
  // the block bookkeeping is the same, only the bytes of a block differ.
  bool latent = false;
};

// The recurrent layers of a hybrid model (kv/state_slots.h): slots for live states and prefix
// snapshots. num_slots == 0: the model has none.
struct StateGroupConfig {
  int32_t num_slots = 0;      // live (max_num_seqs) + max_snapshots
  int32_t max_snapshots = 0;  // the snapshots' memory budget, in slots
  // A snapshot is taken every this many blocks of a sequence, and at the last block boundary
  // each step reaches (its newest state, replaced as it grows: the end of a chat turn).
  int32_t snapshot_every_blocks = 8;
};

// Cached blocks found for a sequence that has none yet; hand back to allocate_slots.
struct CachedPrefix {
  std::vector<std::vector<KvBlock*>> blocks;  // per group; nullptr where a window skips
  std::vector<BlockHash> hashes;              // chain hashes of the hit's blocks
  int32_t num_tokens = 0;                     // hit blocks * block_size
  int32_t state_slot = -1;                    // a hybrid's snapshot at the hit's end
};

// A recurrent-state copy the next forward pass makes (model/batch.h Batch::state_restores /
// state_snapshots): slot src into the live slot dst, or a sequence's state at n_tokens into
// snapshot slot `slot`.
struct StateRestore {
  int32_t src, dst;
};
struct PlannedSnapshot {
  int32_t n_tokens, slot;
  BlockHash hash;
  bool provisional = false;  // inside a verify's proposals: settle_snapshot() decides
};

class KvCoordinator {
 public:
  KvCoordinator(const std::vector<KvGroupConfig>& groups, int32_t block_size, bool enable_caching,
                const StateGroupConfig& states = {});
  // One full-attention group of num_blocks blocks.
  KvCoordinator(int32_t num_blocks, int32_t block_size, bool enable_caching)
      : KvCoordinator({KvGroupConfig{0, num_blocks, 1}}, block_size, enable_caching) {}

  int32_t block_size() const { return block_size_; }
  int num_groups() const { return static_cast<int>(groups_.size()); }
  const KvGroupManager& group(int g) const { return *groups_[g]; }
  // Blocks of the largest group (a full-attention one when the model has it).
  int32_t num_blocks() const;
  // Used fraction of the cache's memory (blocks weighed by their group's layers), 0..1.
  double usage() const;
  bool caching_enabled() const { return caching_; }
  // A proposer whose K/V at a position also depends on the next token (MTP: the target's hidden
  // state there with the next token's embedding): a hit's last position pairs with a token past
  // the hit, which the new sequence may not share, so hits give their last block back (vLLM
  // does the same for EAGLE / MTP) and it is recomputed with the sequence's own next token.
  // Hybrids keep theirs (see find_cached_prefix).
  void set_hits_keep_last_block(bool keep) { hits_keep_last_block_ = keep; }
  // Blocks needed to hold n tokens.
  int32_t blocks_for(int64_t n_tokens) const;
  // Whether a sequence of n_tokens, computing at most max_step tokens per step, fits in every
  // group alone (otherwise it can never run).
  bool fits(int64_t n_tokens, int32_t max_step) const;

  // Longest prefix of `tokens` (full blocks) every group has cached, and for a hybrid model
  // that has a state snapshot at its end. At least one token is always left uncached, since a
  // sequence needs the logits of its last token.
  CachedPrefix find_cached_prefix(std::span<const int32_t> tokens, uint64_t salt);

  // Makes room for tokens [0, num_computed + num_new) of sequence `seq` (`tokens` holds at least
  // that many ids; they are needed to hash blocks that become full) and releases the blocks
  // that fell out of a sliding window. `prefix`, only for a sequence without blocks, is what
  // find_cached_prefix returned; num_computed then includes prefix->num_tokens.
  // `num_lookahead` more slots follow for tokens that are not known yet (a speculative step's
  // proposals): they are never hashed, and truncate() gives back what was not kept. Returns
  // false and allocates nothing if some group has too few free blocks (or, for a hybrid model,
  // no state slot is left). A hybrid sequence gets its live state slot with its first blocks;
  // resuming from `prefix`, the copy of its snapshot is queued (take_state_restores).
  bool allocate_slots(int64_t seq, std::span<const int32_t> tokens, int32_t num_computed,
                      int32_t num_new, uint64_t salt, const CachedPrefix* prefix = nullptr,
                      int32_t num_lookahead = 0);
  // Shrinks the tables of `seq` to cover n_tokens, releasing the blocks past them (the
  // lookahead blocks of rejected proposals).
  void truncate(int64_t seq, int64_t n_tokens);

  // Gives `child` the first `n_blocks` blocks of `parent` in every group (shared: ref counts go
  // up). Used by n > 1 sampling: every sample reuses the prompt's full blocks. False, changing
  // nothing, when a sliding-window group already released a block the child would read, or
  // for a hybrid model (a recurrent state cannot be shared from the middle: the child resumes
  // from the prompt's snapshot through the prefix cache instead).
  bool fork(int64_t parent, int64_t child, int32_t n_blocks);

  // Releases every block of `seq` (no-op for an unknown sequence).
  void free(int64_t seq);
  bool has_blocks(int64_t seq) const { return seqs_.count(seq) != 0; }

  // Physical block ids of `seq` in group g, in logical order. Stable until the next
  // allocate/free of seq.
  const std::vector<int32_t>& block_table(int64_t seq, int g = 0) const {
    return groups_[g]->block_table(seq);
  }

  // ---- Recurrent states (hybrid models) ----
  bool recurrent() const { return states_.num_slots() > 0; }
  const StateSlots& states() const { return states_; }
  int32_t state_slot(int64_t seq) const { return states_.slot_of(seq); }
  // The snapshot copies queued by allocate_slots since the last call (for the next forward).
  std::vector<StateRestore> take_state_restores();
  // Snapshots sequence `seq` (num_tokens known tokens) takes in a step computing tokens
  // (num_computed, num_computed + num_new]: at every snapshot_every_blocks-th block boundary,
  // at the last boundary before its last known token (what the same prompt sent again can
  // resume from: a hit always leaves one token to compute) and at the step's last boundary
  // (its newest state; the previous newest one, if none of the others, is dropped). Registered
  // now under the blocks' hashes (call after allocate_slots; prefix caching on).
  void plan_snapshots(int64_t seq, int32_t num_computed, int32_t num_new, int32_t num_tokens,
                      std::vector<PlannedSnapshot>& out);
  // Snapshots at the block boundaries a verify crosses inside its proposals (the step computes
  // `tokens`, all known, then `draft` after them): registered under the hashes their blocks get
  // if every proposal is kept, marked provisional. A verify that keeps most proposals crosses
  // most boundaries there, so without these the next turn of a conversation would resume from
  // far back. Call after plan_snapshots, with the sequence's cache salt.
  void plan_draft_snapshots(int64_t seq, std::span<const int32_t> tokens,
                            std::span<const int32_t> draft, uint64_t salt,
                            std::vector<PlannedSnapshot>& out);
  // Once the verify has decided: a provisional snapshot whose tokens were all kept stays (the
  // step's last one becomes the sequence's newest, as plan_snapshots' is); the others go.
  void settle_snapshot(int64_t seq, const PlannedSnapshot& snap, bool kept, bool last_kept);
  // Forgets snapshots whose forward pass did not run (it failed).
  void drop_snapshots(std::span<const PlannedSnapshot> snaps);

  // Prefix-cache accounting in tokens, counted when a new sequence is admitted.
  void record_prefix_query(int64_t queried_tokens, int64_t hit_tokens);
  int64_t prefix_query_tokens() const { return prefix_queries_; }
  int64_t prefix_hit_tokens() const { return prefix_hits_; }

  bool reset_prefix_cache();
  // Every group's invariants; "" when fine.
  std::string check_invariants() const;
  // "" when no sequence holds a block (every group's blocks free).
  std::string check_drained() const;

 private:
  std::vector<std::unique_ptr<KvGroupManager>> groups_;
  std::vector<int32_t> group_layers_;
  int32_t block_size_;
  bool caching_;
  bool hits_keep_last_block_ = true;
  std::vector<int32_t> draft_block_;  // plan_draft_snapshots' block of tokens (no allocation)
  // Chain hashes of each sequence's full blocks so far (the same in every group).
  std::unordered_map<int64_t, std::vector<BlockHash>> seqs_;
  StateSlots states_;
  int32_t snapshot_every_ = 8;
  std::vector<StateRestore> restores_;
  // Per hybrid sequence: its newest snapshot off the every-N grid (replaced as it grows).
  std::unordered_map<int64_t, BlockHash> newest_snapshot_;
  int64_t prefix_queries_ = 0;
  int64_t prefix_hits_ = 0;
};

}  // namespace loom
