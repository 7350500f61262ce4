// BlockPool and KvCoordinator on tiny pools (8-16 blocks), in the spirit of vLLM's
// tests/v1/core: exact free-list order, ref counts, hash reuse and eviction order.
#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <random>

#include "kv/kv_coordinator.h"

namespace loom {
namespace {

std::vector<int32_t> ids_of(const std::vector<KvBlock*>& bs) {
  std::vector<int32_t> ids;
  for (auto* b : bs) ids.push_back(b->id);
  return ids;
}

std::vector<int32_t> random_tokens(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % 32000);
  return t;
}

TEST(BlockHash, ChainsParentTokensAndSalt) {
  auto t = random_tokens(32, 1);
  std::span<const int32_t> a(t.data(), 16), b(t.data() + 16, 16);
  BlockHash h0 = hash_block(nullptr, a, 0);
  EXPECT_EQ(h0, hash_block(nullptr, a, 0));
  EXPECT_NE(h0, hash_block(nullptr, b, 0));
  EXPECT_NE(h0, hash_block(nullptr, a, 7));  // salt separates caches
  BlockHash h1 = hash_block(&h0, b, 0);
  EXPECT_NE(h1, hash_block(nullptr, b, 0));  // same tokens, different prefix
  BlockHash other = hash_block(nullptr, b, 0);
  EXPECT_NE(h1, hash_block(&other, b, 0));
}

TEST(BlockPool, AllocatesFromHeadAndRefusesWhenShort) {
  BlockPool pool(10, true);
  EXPECT_EQ(pool.num_free_blocks(), 10);
  auto a = pool.allocate(4);
  EXPECT_EQ(ids_of(a), (std::vector<int32_t>{0, 1, 2, 3}));
  for (auto* b : a) EXPECT_EQ(b->ref_count, 1);
  EXPECT_TRUE(pool.allocate(7).empty());  // only 6 left: all or nothing
  EXPECT_EQ(pool.num_free_blocks(), 6);
  EXPECT_DOUBLE_EQ(pool.usage(), 0.4);
  EXPECT_EQ(pool.check_invariants(), "");
}

TEST(BlockPool, UncachedFreedGoHeadCachedGoTail) {
  BlockPool pool(8, true);
  auto a = pool.allocate(3);  // 0 1 2
  pool.cache(a[0], BlockHash{1, 1});
  pool.cache(a[1], BlockHash{2, 2});
  // Release tail first, as KvCoordinator does.
  std::vector<KvBlock*> rev = {a[2], a[1], a[0]};
  pool.release(rev);
  // Block 2 (no hash) goes to the head; 1 then 0 to the tail.
  EXPECT_EQ(pool.free_list_ids(), (std::vector<int32_t>{2, 3, 4, 5, 6, 7, 1, 0}));
  EXPECT_EQ(pool.lookup(BlockHash{1, 1}), a[0]);
  EXPECT_EQ(pool.check_invariants(), "");
}

TEST(BlockPool, TouchRevivesCachedBlockAndReuseEvictsHash) {
  BlockPool pool(4, true);
  auto a = pool.allocate(4);
  pool.cache(a[0], BlockHash{9, 9});
  pool.release(a);
  KvBlock* hit = pool.lookup(BlockHash{9, 9});
  ASSERT_EQ(hit, a[0]);
  std::vector<KvBlock*> one = {hit};
  pool.touch(one);
  EXPECT_EQ(hit->ref_count, 1);
  EXPECT_EQ(pool.num_free_blocks(), 3);
  pool.touch(one);  // shared by a second sequence
  EXPECT_EQ(hit->ref_count, 2);
  pool.release(one);
  EXPECT_EQ(pool.num_free_blocks(), 3);
  pool.release(one);
  EXPECT_EQ(pool.num_free_blocks(), 4);
  // Reusing every block evicts the hash.
  auto all = pool.allocate(4);
  EXPECT_EQ(all.size(), 4u);
  EXPECT_EQ(pool.lookup(BlockHash{9, 9}), nullptr);
  EXPECT_FALSE(all.back()->hash.has_value());
  EXPECT_EQ(pool.check_invariants(), "");
}

TEST(BlockPool, DuplicateHashStaysUnregistered) {
  BlockPool pool(4, true);
  auto a = pool.allocate(2);
  pool.cache(a[0], BlockHash{5, 5});
  pool.cache(a[1], BlockHash{5, 5});
  EXPECT_EQ(pool.lookup(BlockHash{5, 5}), a[0]);
  EXPECT_FALSE(a[1]->hash.has_value());
  EXPECT_EQ(pool.check_invariants(), "");
}

TEST(BlockPool, CachingDisabledNeverHits) {
  BlockPool pool(4, false);
  auto a = pool.allocate(1);
  pool.cache(a[0], BlockHash{5, 5});
  EXPECT_EQ(pool.lookup(BlockHash{5, 5}), nullptr);
}

TEST(KvCoordinator, AllocatesOnlyWhatNewTokensNeed) {
  KvCoordinator m(16, 4, true);
  auto t = random_tokens(40, 2);
  ASSERT_TRUE(m.allocate_slots(1, t, 0, 5, 0));  // 5 tokens: 2 blocks
  EXPECT_EQ(m.block_table(1).size(), 2u);
  ASSERT_TRUE(m.allocate_slots(1, t, 5, 3, 0));  // up to 8: still 2
  EXPECT_EQ(m.block_table(1).size(), 2u);
  ASSERT_TRUE(m.allocate_slots(1, t, 8, 1, 0));  // 9th token: third block
  EXPECT_EQ(m.block_table(1).size(), 3u);
  EXPECT_EQ(m.group(0).num_free_blocks(), 13);
  // No space: nothing changes.
  KvCoordinator small(3, 4, true);
  EXPECT_FALSE(small.allocate_slots(1, t, 0, 13, 0));
  EXPECT_EQ(small.group(0).num_free_blocks(), 3);
  EXPECT_TRUE(small.block_table(1).empty());
}

TEST(KvCoordinator, PrefixHitSharesBlocksAndLeavesLastToken) {
  KvCoordinator m(16, 4, true);
  auto t = random_tokens(12, 3);  // exactly 3 blocks
  ASSERT_TRUE(m.allocate_slots(1, t, 0, 12, 0));
  const auto table1 = m.block_table(1);
  // Same prompt: only 2 of 3 blocks hit, since the last token must be computed again.
  CachedPrefix p = m.find_cached_prefix(t, 0);
  EXPECT_EQ(p.num_tokens, 8);
  EXPECT_EQ(ids_of(p.blocks[0]), (std::vector<int32_t>{table1[0], table1[1]}));
  // Different salt: nothing.
  EXPECT_EQ(m.find_cached_prefix(t, 1).num_tokens, 0);
  // A longer prompt with the same 12-token start hits all 3.
  auto t2 = t;
  for (int i = 0; i < 5; ++i) t2.push_back(100 + i);
  CachedPrefix p2 = m.find_cached_prefix(t2, 0);
  EXPECT_EQ(p2.num_tokens, 12);
  ASSERT_TRUE(m.allocate_slots(2, t2, p2.num_tokens, 5, 0, &p2));
  const auto& table2 = m.block_table(2);
  ASSERT_EQ(table2.size(), 5u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(table2[i], table1[i]);
  EXPECT_EQ(m.group(0).pool().block(table1[0]).ref_count, 2);
  m.free(1);
  m.free(2);
  EXPECT_EQ(m.group(0).num_free_blocks(), 16);
  EXPECT_EQ(m.group(0).pool().check_invariants(), "");
}

TEST(KvCoordinator, FreedPrefixStillHitsAndCountsFreeCapacity) {
  KvCoordinator m(4, 4, true);
  auto t = random_tokens(13, 4);
  ASSERT_TRUE(m.allocate_slots(1, t, 0, 13, 0));  // all 4 blocks
  m.free(1);
  EXPECT_EQ(m.group(0).num_free_blocks(), 4);
  CachedPrefix p = m.find_cached_prefix(t, 0);
  EXPECT_EQ(p.num_tokens, 12);
  // Reviving the 3 cached blocks uses 3 free blocks; 1 more is needed: fits exactly.
  ASSERT_TRUE(m.allocate_slots(2, t, 12, 1, 0, &p));
  EXPECT_EQ(m.group(0).num_free_blocks(), 0);
  EXPECT_EQ(m.group(0).pool().check_invariants(), "");
}

TEST(KvCoordinator, EvictionIsLeastRecentlyUsedTailFirst) {
  KvCoordinator m(6, 4, true);
  auto a = random_tokens(9, 5), b = random_tokens(9, 6);
  ASSERT_TRUE(m.allocate_slots(1, a, 0, 9, 0));  // 3 blocks, 2 full (cached)
  m.free(1);
  ASSERT_TRUE(m.allocate_slots(2, b, 0, 9, 0));
  m.free(2);
  EXPECT_EQ(m.find_cached_prefix(a, 0).num_tokens, 8);
  EXPECT_EQ(m.find_cached_prefix(b, 0).num_tokens, 8);
  // A new 12-token sequence needs 3 blocks: the 2 uncached ones, then a's tail block
  // (a was used before b, and a sequence's last block goes before its first).
  auto c = random_tokens(12, 7);
  ASSERT_TRUE(m.allocate_slots(3, c, 0, 12, 0));
  EXPECT_EQ(m.find_cached_prefix(a, 0).num_tokens, 4);
  EXPECT_EQ(m.find_cached_prefix(b, 0).num_tokens, 8);
  EXPECT_EQ(m.group(0).pool().check_invariants(), "");
}

TEST(KvCoordinator, ForkSharesPrefixBlocks) {
  KvCoordinator m(8, 4, true);
  auto t = random_tokens(10, 8);
  ASSERT_TRUE(m.allocate_slots(1, t, 0, 10, 0));
  ASSERT_TRUE(m.fork(1, 2, 2));
  EXPECT_EQ(m.block_table(2).size(), 2u);
  EXPECT_EQ(m.group(0).pool().block(m.block_table(1)[0]).ref_count, 2);
  ASSERT_TRUE(m.allocate_slots(2, t, 8, 2, 0));
  EXPECT_EQ(m.block_table(2).size(), 3u);
  EXPECT_NE(m.block_table(2)[2], m.block_table(1)[2]);
  m.free(1);
  m.free(2);
  EXPECT_EQ(m.group(0).num_free_blocks(), 8);
  EXPECT_EQ(m.group(0).pool().check_invariants(), "");
}

TEST(KvCoordinator, RandomOperationsKeepInvariants) {
  std::mt19937 rng(42);
  KvCoordinator m(12, 4, true);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) prompts.push_back(random_tokens(30, 100 + i));
  std::unordered_map<int64_t, std::pair<int, int32_t>> live;  // seq -> (prompt, computed)
  int64_t next = 0;
  for (int step = 0; step < 3000; ++step) {
    int op = rng() % 3;
    if (op == 0) {
      int p = rng() % prompts.size();
      CachedPrefix pre = m.find_cached_prefix(prompts[p], 0);
      int32_t n = 1 + rng() % (30 - pre.num_tokens);
      if (m.allocate_slots(next, prompts[p], pre.num_tokens, n, 0, &pre))
        live[next] = {p, pre.num_tokens + n};
      ++next;
    } else if (op == 1 && !live.empty()) {
      auto it = std::next(live.begin(), rng() % live.size());
      auto& [p, c] = it->second;
      if (c < 30) {
        int32_t n = 1 + rng() % (30 - c);
        if (m.allocate_slots(it->first, prompts[p], c, n, 0)) c += n;
      }
    } else if (!live.empty()) {
      auto it = std::next(live.begin(), rng() % live.size());
      m.free(it->first);
      live.erase(it);
    }
    ASSERT_EQ(m.group(0).pool().check_invariants(), "") << "step " << step;
    int32_t used = 0;
    for (auto& [s, pc] : live) {
      EXPECT_EQ(static_cast<int32_t>(m.block_table(s).size()), m.blocks_for(pc.second));
      used += m.blocks_for(pc.second);
    }
    EXPECT_LE(m.group(0).num_used_blocks(), used);  // sharing can only save blocks
  }
  for (auto& [s, pc] : live) m.free(s);
  EXPECT_EQ(m.group(0).num_free_blocks(), 12);
}

}  // namespace
}  // namespace loom
