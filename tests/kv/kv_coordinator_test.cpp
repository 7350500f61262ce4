// KvCoordinator with a full-attention group and a sliding-window group (window 8, blocks of 4
// tokens): blocks behind a sequence's window are released as it grows (their table entries
// become the group's null block), a prefix hit asks the window group only for the blocks of
// the window before its end, and a fork that would read a released block is refused. Expected
// values come from the window arithmetic: a query at position p reads keys [p - 7, p].
#include "kv/kv_coordinator.h"

#include <gtest/gtest.h>

#include <random>

namespace loom {
namespace {

constexpr int32_t kBs = 4, kWindow = 8;

std::vector<int32_t> random_tokens(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % 32000);
  return t;
}

// Blocks wholly before the window of a query at position `pos` (its first key pos - 7).
int32_t blocks_behind(int32_t pos) {
  return std::max(0, pos - kWindow + 1) / kBs;
}

KvCoordinator two_groups(int32_t full_blocks, int32_t window_blocks) {
  return KvCoordinator({{0, full_blocks, 1}, {kWindow, window_blocks, 5}}, kBs, true);
}

// Runs `seq` over tokens [from, to) one token per step (decode-like).
void decode(KvCoordinator& kv, int64_t seq, const std::vector<int32_t>& t, int32_t from,
            int32_t to) {
  for (int32_t c = from; c < to; ++c) ASSERT_TRUE(kv.allocate_slots(seq, t, c, 1, 0)) << c;
}

TEST(KvCoordinator, WindowGroupReleasesBlocksBehindTheWindow) {
  KvCoordinator kv = two_groups(32, 32);
  const KvGroupManager& full = kv.group(0);
  const KvGroupManager& win = kv.group(1);
  const int32_t null_id = 0;  // the window group's null block
  auto t = random_tokens(64, 1);
  ASSERT_TRUE(kv.allocate_slots(1, t, 0, 20, 0));  // prompt of 20: nothing behind yet
  EXPECT_EQ(win.num_used_blocks(), 5);
  for (int32_t c = 20; c < 60; ++c) {
    ASSERT_TRUE(kv.allocate_slots(1, t, c, 1, 0));
    const int32_t total = (c + 1 + kBs - 1) / kBs;
    const int32_t behind = blocks_behind(c);
    EXPECT_EQ(full.num_used_blocks(), total) << c;
    EXPECT_EQ(win.num_used_blocks(), total - behind) << c;
    EXPECT_EQ(win.num_window_released_blocks(), behind) << c;
    const auto& table = kv.block_table(1, 1);
    ASSERT_EQ(static_cast<int32_t>(table.size()), total);
    ASSERT_EQ(static_cast<int32_t>(kv.block_table(1, 0).size()), total);
    for (int32_t i = 0; i < total; ++i)
      EXPECT_EQ(table[i] == null_id, i < behind) << "block " << i << " at " << c;
  }
  // The window group never holds more than the window's blocks plus the one being filled.
  EXPECT_LE(win.num_used_blocks(), (kWindow - 1 + kBs - 1) / kBs + 1);
  kv.free(1);
  EXPECT_EQ(kv.check_drained(), "");
  EXPECT_EQ(win.num_free_blocks(), 32);
}

TEST(KvCoordinator, PromptChunksReleaseOnlyWhatTheChunkDoesNotRead) {
  KvCoordinator kv = two_groups(32, 32);
  auto t = random_tokens(64, 2);
  ASSERT_TRUE(kv.allocate_slots(1, t, 0, 16, 0));
  // The chunk [16, 32) starts at 16: its first query reads from 9, so block 2 (8..11) stays.
  ASSERT_TRUE(kv.allocate_slots(1, t, 16, 16, 0));
  EXPECT_EQ(kv.group(1).num_window_released_blocks(), blocks_behind(16));
  EXPECT_EQ(blocks_behind(16), 2);
  EXPECT_EQ(kv.group(1).num_used_blocks(), 8 - 2);
  kv.free(1);
  EXPECT_EQ(kv.check_drained(), "");
}

TEST(KvCoordinator, PrefixHitNeedsOnlyTheWindowBeforeItsEnd) {
  // The window group's pool is small, so a second sequence reuses the blocks the first
  // released: its early blocks lose their hashes, its last ones keep them.
  KvCoordinator kv = two_groups(32, 6);
  auto a = random_tokens(41, 3);
  ASSERT_TRUE(kv.allocate_slots(1, a, 0, 8, 0));
  decode(kv, 1, a, 8, 40);
  kv.free(1);
  auto b = random_tokens(24, 4);
  ASSERT_TRUE(kv.allocate_slots(2, b, 0, 4, 0));  // takes free window blocks, evicting a's
  kv.free(2);
  // A 41-token prompt can hit at most (41 - 1) / 4 = 10 blocks; the full group has them all,
  // and the window group needs blocks [blocks_behind(40), 10) = [8, 10) of it.
  CachedPrefix p = kv.find_cached_prefix(a, 0);
  ASSERT_EQ(p.num_tokens, 40);
  ASSERT_EQ(p.blocks.size(), 2u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_NE(p.blocks[0][i], nullptr) << i;
    EXPECT_EQ(p.blocks[1][i] != nullptr, i >= blocks_behind(40)) << i;
  }
  ASSERT_TRUE(kv.allocate_slots(3, a, 40, 1, 0, &p));
  EXPECT_EQ(kv.block_table(3, 1).size(), 11u);
  EXPECT_EQ(kv.block_table(3, 1)[0], 0);  // the null block
  EXPECT_EQ(kv.check_invariants(), "");
  kv.free(3);
  EXPECT_EQ(kv.check_drained(), "");
}

TEST(KvCoordinator, PrefixHitShrinksToWhereTheWindowIsStillCached) {
  KvCoordinator kv = two_groups(32, 12);
  auto a = random_tokens(41, 5);
  ASSERT_TRUE(kv.allocate_slots(1, a, 0, 40, 0));  // one chunk: all 10 blocks cached
  kv.free(1);
  // Freed tail first: after the 2 never-used blocks, block 9 of `a` is the first to be
  // evicted, then 8, ...: the next 4 blocks taken evict blocks 9 and 8 from the window group.
  auto b = random_tokens(8, 6);
  ASSERT_TRUE(kv.allocate_slots(2, b, 0, 4, 0));
  ASSERT_TRUE(kv.allocate_slots(3, random_tokens(8, 7), 0, 8, 0));
  ASSERT_TRUE(kv.allocate_slots(4, random_tokens(8, 8), 0, 4, 0));
  // Window blocks left: 0..7 of a (10 - 2 evicted). The longest hit h with blocks
  // [blocks_behind(4h), h) cached: h = 8 (needs 6, 7).
  CachedPrefix p = kv.find_cached_prefix(a, 0);
  EXPECT_EQ(p.num_tokens, 32);
  EXPECT_EQ(p.blocks[0].size(), 8u);
  EXPECT_EQ(p.hashes.size(), 8u);
  for (int64_t s : {2, 3, 4}) kv.free(s);
  EXPECT_EQ(kv.check_drained(), "");
}

TEST(KvCoordinator, ForkIsRefusedWhenTheWindowReleasedABlockTheChildReads) {
  KvCoordinator kv = two_groups(32, 32);
  auto t = random_tokens(40, 9);
  ASSERT_TRUE(kv.allocate_slots(1, t, 0, 12, 0));
  decode(kv, 1, t, 12, 16);  // last step at 15: blocks_behind(15) = 2 released
  ASSERT_EQ(kv.group(1).num_window_released_blocks(), 2);
  // A child starting at 12 tokens reads from position 5 (block 1): released.
  EXPECT_FALSE(kv.fork(1, 2, 3));
  EXPECT_FALSE(kv.has_blocks(2));
  // At 16 tokens it reads from 9 (block 2): still there.
  EXPECT_TRUE(kv.fork(1, 3, 4));
  EXPECT_EQ(kv.block_table(3, 1)[0], 0);
  EXPECT_EQ(kv.block_table(3, 1)[3], kv.block_table(1, 1)[3]);
  ASSERT_TRUE(kv.allocate_slots(3, t, 16, 1, 0));
  kv.free(1);
  kv.free(3);
  EXPECT_EQ(kv.check_drained(), "");
}

TEST(KvCoordinator, NoSpaceInEitherGroupAllocatesNothing) {
  KvCoordinator kv = two_groups(4, 3);
  auto t = random_tokens(40, 10);
  EXPECT_FALSE(kv.allocate_slots(1, t, 0, 16, 0));  // the full group fits 4, the window not
  EXPECT_FALSE(kv.has_blocks(1));
  EXPECT_EQ(kv.group(0).num_used_blocks(), 0);
  EXPECT_EQ(kv.group(1).num_used_blocks(), 0);
  EXPECT_TRUE(kv.fits(16, 1));    // decoding: 4 blocks, of which the window reads at most 3
  EXPECT_FALSE(kv.fits(17, 1));   // 5 full-attention blocks
  EXPECT_FALSE(kv.fits(16, 16));  // a 16-token step needs 4 window blocks
}

TEST(KvCoordinator, RandomOperationsKeepInvariantsAndWindows) {
  std::mt19937 rng(42);
  KvCoordinator kv = two_groups(40, 14);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) prompts.push_back(random_tokens(40, 100 + i));
  std::unordered_map<int64_t, std::pair<int, int32_t>> live;  // seq -> (prompt, computed)
  int64_t next = 0;
  for (int step = 0; step < 3000; ++step) {
    const int op = rng() % 3;
    if (op == 0) {
      const int p = rng() % prompts.size();
      CachedPrefix pre = kv.find_cached_prefix(prompts[p], 0);
      const int32_t n = 1 + rng() % (40 - pre.num_tokens);
      if (kv.allocate_slots(next, prompts[p], pre.num_tokens, n, 0, &pre))
        live[next] = {p, pre.num_tokens + n};
      ++next;
    } else if (op == 1 && !live.empty()) {
      auto it = std::next(live.begin(), rng() % live.size());
      auto& [p, c] = it->second;
      if (c < 40) {
        const int32_t n = 1 + rng() % std::min(4, 40 - c);
        if (kv.allocate_slots(it->first, prompts[p], c, n, 0)) c += n;
      }
    } else if (!live.empty()) {
      auto it = std::next(live.begin(), rng() % live.size());
      kv.free(it->first);
      live.erase(it);
    }
    ASSERT_EQ(kv.check_invariants(), "") << "step " << step;
    // Every live sequence's window-group table holds real blocks from where its last step's
    // window began (or earlier) and the null block only before it.
    for (auto& [s, pc] : live) {
      const auto& table = kv.block_table(s, 1);
      ASSERT_EQ(static_cast<int32_t>(table.size()), kv.blocks_for(pc.second));
      for (int32_t i = blocks_behind(pc.second - 1); i < static_cast<int32_t>(table.size()); ++i)
        ASSERT_NE(table[i], 0) << "seq " << s << " block " << i << " step " << step;
    }
  }
  for (auto& [s, pc] : live) kv.free(s);
  EXPECT_EQ(kv.check_drained(), "");
}

}  // namespace
}  // namespace loom
