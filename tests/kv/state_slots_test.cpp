// The recurrent layer group (kv/state_slots.h) and the KvCoordinator's use of it for a hybrid
// model: live slots per sequence, prefix snapshots keyed by block hashes and evicted least
// recently used, a prefix hit that ends where a snapshot exists, and the copies the forward
// pass is asked to make. Expected values follow from the block arithmetic (blocks of 16).
#include "kv/state_slots.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "kv/kv_coordinator.h"

namespace loom {
namespace {

constexpr int32_t kBs = 16;

std::vector<int32_t> random_tokens(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % 32000);
  return t;
}

BlockHash hash_of(uint64_t i) {
  return {i * 0x9E3779B97F4A7C15ull + 1, i};
}

TEST(StateSlots, LiveSlotsAreDistinctAndReturnedOnRelease) {
  StateSlots s(4, 0);
  std::set<int32_t> seen;
  for (int64_t seq = 0; seq < 4; ++seq) seen.insert(s.acquire(seq));
  EXPECT_EQ(seen.size(), 4u);
  EXPECT_EQ(*seen.begin(), 0);
  EXPECT_EQ(*seen.rbegin(), 3);
  EXPECT_EQ(s.acquire(9), -1);            // every slot live, no snapshot to evict
  EXPECT_EQ(s.acquire(2), s.slot_of(2));  // a second call returns the same slot
  const int32_t freed = s.slot_of(1);
  s.release(1);
  EXPECT_EQ(s.slot_of(1), -1);
  EXPECT_EQ(s.acquire(9), freed);
  EXPECT_EQ(s.check_invariants(), "");
}

TEST(StateSlots, SnapshotsAreEvictedLeastRecentlyUsedFirst) {
  StateSlots s(5, 3);
  const int32_t a = s.add_snapshot(hash_of(1));
  const int32_t b = s.add_snapshot(hash_of(2));
  const int32_t c = s.add_snapshot(hash_of(3));
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  ASSERT_GE(c, 0);
  EXPECT_EQ(s.add_snapshot(hash_of(2)), -1);  // already there
  EXPECT_EQ(s.find_snapshot(hash_of(1)), a);  // now the most recently used
  // The budget is 3 snapshots: the fourth evicts the least recently used, hash 2.
  const int32_t d = s.add_snapshot(hash_of(4));
  EXPECT_EQ(d, b);
  EXPECT_EQ(s.find_snapshot(hash_of(2)), -1);
  EXPECT_EQ(s.num_snapshots_evicted(), 1);
  // Live slots take free ones first (two are left), then evict snapshots (LRU: 3, then 1),
  // never the one a sequence is about to resume from.
  EXPECT_GE(s.acquire(10), 0);
  EXPECT_GE(s.acquire(11), 0);
  EXPECT_EQ(s.acquire(12, /*keep=*/c), a);  // hash 3 is the LRU but kept: hash 1 goes
  EXPECT_EQ(s.find_snapshot(hash_of(3)), c);
  EXPECT_EQ(s.acquire(13, /*keep=*/d), c);
  EXPECT_EQ(s.acquire(14, /*keep=*/d), -1);  // only the kept snapshot is left
  EXPECT_EQ(s.check_invariants(), "");
  s.clear_snapshots();
  EXPECT_EQ(s.num_snapshots(), 0);
  EXPECT_EQ(s.check_invariants(), "");
}

KvCoordinator hybrid(int32_t blocks, int32_t live, int32_t snapshots, int32_t every,
                     bool caching = true) {
  return KvCoordinator({{0, blocks, 1}}, kBs, caching,
                       StateGroupConfig{live + snapshots, snapshots, every});
}

TEST(KvCoordinatorStates, SnapshotsOnTheGridAndAtTheNewestBoundary) {
  KvCoordinator kv = hybrid(64, 2, 16, /*every=*/4);
  ASSERT_TRUE(kv.recurrent());
  const auto t = random_tokens(200, 1);
  // A 150-token prompt in chunks of 64: boundaries at 16, 32, ... 144; the grid (every 4
  // blocks) takes 64 and 128; each chunk's last boundary is taken as the newest, and each
  // newest off the grid replaces the previous one.
  std::vector<int32_t> taken;
  for (int32_t done = 0; done < 150;) {
    const int32_t n = std::min(64, 150 - done);
    ASSERT_TRUE(kv.allocate_slots(7, t, done, n, 0));
    std::vector<PlannedSnapshot> snaps;
    kv.plan_snapshots(7, done, n, 200, snaps);
    for (const PlannedSnapshot& s : snaps) {
      EXPECT_EQ(s.n_tokens % kBs, 0);
      EXPECT_GT(s.n_tokens, done);
      EXPECT_LE(s.n_tokens, done + n);
      taken.push_back(s.n_tokens);
    }
    done += n;
  }
  EXPECT_EQ(taken, (std::vector<int32_t>{64, 128, 144}));
  EXPECT_EQ(kv.states().num_snapshots(), 3);
  EXPECT_GE(kv.state_slot(7), 0);
  // A request sharing the first 150 tokens resumes from the deepest snapshot (144), and its
  // live slot is queued to receive that snapshot's state.
  auto t2 = t;
  t2[160] += 1;
  CachedPrefix p = kv.find_cached_prefix(t2, 0);
  EXPECT_EQ(p.num_tokens, 144);
  ASSERT_GE(p.state_slot, 0);
  ASSERT_TRUE(kv.allocate_slots(8, t2, p.num_tokens, 20, 0, &p));
  const auto restores = kv.take_state_restores();
  ASSERT_EQ(restores.size(), 1u);
  EXPECT_EQ(restores[0].src, p.state_slot);
  EXPECT_EQ(restores[0].dst, kv.state_slot(8));
  EXPECT_NE(kv.state_slot(8), kv.state_slot(7));
  EXPECT_TRUE(kv.take_state_restores().empty());
  // Diverging at token 100: the deepest snapshot inside the shared blocks is 64, although the
  // KV blocks themselves would serve 96 tokens.
  auto t3 = t;
  t3[100] += 1;
  EXPECT_EQ(kv.find_cached_prefix(t3, 0).num_tokens, 64);
  // n > 1 cannot share a recurrent state from the middle.
  EXPECT_FALSE(kv.fork(7, 9, 4));
  kv.free(7);
  kv.free(8);
  EXPECT_EQ(kv.check_drained(), "");
  EXPECT_EQ(kv.states().num_snapshots(), 3);  // still cached for later requests
}

TEST(KvCoordinatorStates, DecodeKeepsOneNewestSnapshotPerSequence) {
  KvCoordinator kv = hybrid(64, 1, 8, /*every=*/100);
  const auto t = random_tokens(300, 2);
  ASSERT_TRUE(kv.allocate_slots(1, t, 0, 20, 0));
  std::vector<PlannedSnapshot> snaps;
  kv.plan_snapshots(1, 0, 20, 20, snaps);
  for (int32_t c = 20; c < 120; ++c) {
    ASSERT_TRUE(kv.allocate_slots(1, t, c, 1, 0));
    kv.plan_snapshots(1, c, 1, c + 1, snaps);
  }
  // 16 is the prompt's last boundary before its last token (kept); 32, ..., 112 were each the
  // newest once, and only the last of them is kept.
  EXPECT_EQ(snaps.size(), 7u);
  EXPECT_EQ(snaps.front().n_tokens, 16);
  EXPECT_EQ(snaps.back().n_tokens, 112);
  EXPECT_EQ(kv.states().num_snapshots(), 2);
  EXPECT_EQ(kv.find_cached_prefix(t, 0).num_tokens, 112);
  // A failed forward pass: the snapshots it would have written are forgotten.
  kv.drop_snapshots(std::span<const PlannedSnapshot>(&snaps.back(), 1));
  EXPECT_EQ(kv.states().num_snapshots(), 1);
  EXPECT_EQ(kv.find_cached_prefix(t, 0).num_tokens, 16);
  kv.free(1);
  EXPECT_EQ(kv.check_drained(), "");
}

// The same prompt sent twice: a hit leaves its last token to compute, so it can only resume
// from the last boundary before that token, which the first request's prefill snapshots.
TEST(KvCoordinatorStates, TheSamePromptAgainResumesBeforeItsLastToken) {
  KvCoordinator kv = hybrid(64, 2, 8, /*every=*/100);
  const auto t = random_tokens(80, 4);
  ASSERT_TRUE(kv.allocate_slots(1, t, 0, 80, 0));
  std::vector<PlannedSnapshot> snaps;
  kv.plan_snapshots(1, 0, 80, 80, snaps);
  ASSERT_EQ(snaps.size(), 2u);
  EXPECT_EQ(snaps[0].n_tokens, 64);
  EXPECT_EQ(snaps[1].n_tokens, 80);
  kv.free(1);
  EXPECT_EQ(kv.find_cached_prefix(t, 0).num_tokens, 64);
}

TEST(KvCoordinatorStates, WithoutPrefixCachingNoSnapshotsAndNoHits) {
  KvCoordinator kv = hybrid(64, 2, 0, 1, /*caching=*/false);
  const auto t = random_tokens(100, 3);
  ASSERT_TRUE(kv.allocate_slots(1, t, 0, 64, 0));
  std::vector<PlannedSnapshot> snaps;
  kv.plan_snapshots(1, 0, 64, 100, snaps);
  EXPECT_TRUE(snaps.empty());
  EXPECT_EQ(kv.find_cached_prefix(t, 0).num_tokens, 0);
  // Two live sequences fit, a third finds no slot and allocates nothing.
  ASSERT_TRUE(kv.allocate_slots(2, t, 0, 16, 0));
  const int32_t used = kv.group(0).num_used_blocks();
  EXPECT_FALSE(kv.allocate_slots(3, t, 0, 16, 0));
  EXPECT_EQ(kv.group(0).num_used_blocks(), used);
  EXPECT_FALSE(kv.has_blocks(3));
  kv.free(1);
  EXPECT_TRUE(kv.allocate_slots(3, t, 0, 16, 0));
  kv.free(2);
  kv.free(3);
  EXPECT_EQ(kv.check_drained(), "");
}

}  // namespace
}  // namespace loom
