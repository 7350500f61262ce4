// Multi-query paged attention against the scalar double reference on every ISA, and the batch
// invariance it promises: a query's output is bit-identical alone or among many others.
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/ref/ops_ref.h"
#include "test_util.h"

namespace loom::kernels {
namespace {

using testing::random_normal;
using testing::rel_error;

// How K is laid out: V is always in rows (a token's values adjacent, two KV heads per token,
// this one the second); K either the same way or dim-major per block and head (the CPU
// cache's layout, backend/cpu/kv_storage.h) with a given block size.
struct Layout {
  bool k_dim_major;
  int32_t block_size;
};
const Layout kLayouts[] = {{false, 16}, {true, 16}, {true, 32}, {true, 8}, {true, 24}};

// One KV head of a scrambled paged cache filled with random K/V.
struct Cache {
  Dtype dtype;
  int64_t head_dim;
  Layout layout;
  std::vector<int32_t> table;
  std::vector<uint8_t> k, v;
  uint64_t esize, block_stride;

  Cache(Dtype dt, int64_t hd, int32_t n_tokens, uint32_t seed, Layout lay = {true, 16})
      : dtype(dt), head_dim(hd), layout(lay) {
    const int32_t bs = lay.block_size;
    const int32_t n_blocks = (n_tokens + bs - 1) / bs;
    // Scrambled, and a permutation (a multiplier prime to n_blocks): no two logical blocks
    // share one physical block, so a window differs from the whole even with repeating data.
    int32_t mult = 7;
    while (std::gcd(mult, n_blocks) != 1) mult += 2;
    for (int32_t i = 0; i < n_blocks; ++i) table.push_back((i * mult + 3) % n_blocks);
    esize = dt == Dtype::kF32 ? 4 : 2;
    block_stride = 2 * bs * hd * esize;  // two KV heads
    k.resize(n_blocks * block_stride);
    v.resize(n_blocks * block_stride);
    const auto kr = random_normal(n_blocks * bs * 2 * hd, seed);
    const auto vr = random_normal(n_blocks * bs * 2 * hd, seed + 1);
    for (int64_t b = 0; b < n_blocks; ++b)
      for (int64_t t = 0; t < bs; ++t)
        for (int64_t h = 0; h < 2; ++h) {
          const int64_t i = ((b * bs + t) * 2 + h) * hd;
          store_kv(dt, &vr[i], v.data() + b * block_stride + (t * 2 + h) * hd * esize, hd);
          if (lay.k_dim_major)
            store_kv_strided(dt, &kr[i], k.data() + b * block_stride + (h * hd * bs + t) * esize,
                             hd, bs * esize);
          else
            store_kv(dt, &kr[i], k.data() + b * block_stride + (t * 2 + h) * hd * esize, hd);
        }
  }
  PagedHead v_head() const {
    return PagedHead{v.data() + head_dim * esize, dtype,        table.data(),
                     layout.block_size,           block_stride, 2 * head_dim * esize};
  }
  // Points the table's blocks that lie wholly before token `begin` far past the cache, where
  // any read faults: attention over windows from `begin` on must not touch them.
  void poison_before(int32_t begin) {
    for (int32_t b = 0; (b + 1) * layout.block_size <= begin; ++b) table[b] = 1 << 28;
  }
  PagedHead k_head() const {
    if (!layout.k_dim_major)
      return PagedHead{k.data() + head_dim * esize, dtype,        table.data(),
                       layout.block_size,           block_stride, 2 * head_dim * esize};
    return PagedHead{k.data() + head_dim * layout.block_size * esize,
                     dtype,
                     table.data(),
                     layout.block_size,
                     block_stride,
                     esize,
                     layout.block_size * esize};
  }
};

class AttentionMulti : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override { set_active_isa(GetParam()); }
  void TearDown() override { set_active_isa(best_isa()); }
};

TEST_P(AttentionMulti, MatchesReferenceForEveryKvDtypeAndHeadSize) {
  for (const Layout& lay : kLayouts)
    for (Dtype dt : {Dtype::kF32, Dtype::kF16, Dtype::kBF16}) {
      for (int64_t hd : {16, 64, 80, 128, 256}) {
        const int32_t max_kv = 77;
        Cache cache(dt, hd, max_kv, 11, lay);
        // Queries of many lengths (1 .. max_kv), scores large enough to make softmax peaky.
        const std::vector<int32_t> lens = {1, 2, 15, 16, 17, 33, 64, 77, 5};
        const auto q = random_normal(lens.size() * hd, 3, 0.6f);
        std::vector<float> out(lens.size() * hd), want(hd);
        std::vector<AttentionQuery> qs;
        for (size_t i = 0; i < lens.size(); ++i) qs.push_back({&q[i * hd], &out[i * hd], lens[i]});
        std::vector<float> scratch(attention_scratch_floats(qs.size(), max_kv, hd));
        attention_multi(qs.data(), qs.size(), cache.k_head(), cache.v_head(), hd, 0.3f,
                        scratch.data());
        for (size_t i = 0; i < lens.size(); ++i) {
          ref::attention(&q[i * hd], cache.k_head(), cache.v_head(), hd, lens[i], 0.3f,
                         want.data());
          EXPECT_LT(rel_error(&out[i * hd], want.data(), hd), 2e-6)
              << dtype_name(dt) << " head_dim=" << hd << " n_kv=" << lens[i] << " K "
              << (lay.k_dim_major ? "dim-major" : "rows") << " block " << lay.block_size;
        }
      }
    }
}

// Attention sinks (gpt-oss): each query's learned logit joins its softmax as a term with no
// value; sinks below, among and above the scores, windows included, against the reference.
TEST_P(AttentionMulti, SinksMatchReference) {
  for (const Layout& lay : kLayouts)
    for (int64_t hd : {16, 64}) {
      const int32_t max_kv = 40;
      Cache cache(Dtype::kF16, hd, max_kv, 13, lay);
      const std::vector<int32_t> lens = {1, 9, 16, 40, 23};
      const std::vector<int32_t> begins = {0, 0, 8, 32, 3};
      const std::vector<float> sinks = {0.7f, -3.0f, 2.5f, 9.0f, -0.2f};
      const auto q = random_normal(lens.size() * hd, 8, 0.6f);
      std::vector<float> out(lens.size() * hd), plain(hd), want(hd);
      std::vector<AttentionQuery> qs;
      for (size_t i = 0; i < lens.size(); ++i)
        qs.push_back({&q[i * hd], &out[i * hd], lens[i], begins[i], sinks[i]});
      std::vector<float> scratch(attention_scratch_floats(qs.size(), max_kv, hd));
      attention_multi(qs.data(), qs.size(), cache.k_head(), cache.v_head(), hd, 0.4f,
                      scratch.data());
      for (size_t i = 0; i < lens.size(); ++i) {
        ref::attention(&q[i * hd], cache.k_head(), cache.v_head(), hd, lens[i], 0.4f, want.data(),
                       begins[i], 0.0f, sinks[i]);
        EXPECT_LT(rel_error(&out[i * hd], want.data(), hd), 2e-6) << "query " << i;
        // The sink takes weight away from the values: the output shrinks against no sink.
        ref::attention(&q[i * hd], cache.k_head(), cache.v_head(), hd, lens[i], 0.4f, plain.data(),
                       begins[i]);
        double n_sink = 0, n_plain = 0;
        for (int64_t d = 0; d < hd; ++d) {
          n_sink += double(want[d]) * want[d];
          n_plain += double(plain[d]) * plain[d];
        }
        EXPECT_LT(n_sink, n_plain) << "query " << i;
      }
    }
}

TEST_P(AttentionMulti, QueryResultDoesNotDependOnTheOtherQueries) {
  for (const Layout& lay : kLayouts) {
    const int64_t hd = 128;
    const int32_t max_kv = 150;
    Cache cache(Dtype::kF16, hd, max_kv, 21, lay);
    const int n = 24;
    const auto q = random_normal(n * hd, 4);
    std::mt19937 rng(9);
    std::vector<int32_t> lens(n);
    for (auto& l : lens) l = 1 + rng() % max_kv;
    std::vector<float> together(n * hd), alone(hd);
    std::vector<AttentionQuery> qs;
    for (int i = 0; i < n; ++i) qs.push_back({&q[i * hd], &together[i * hd], lens[i]});
    std::vector<float> scratch(attention_scratch_floats(n, max_kv, hd));
    attention_multi(qs.data(), n, cache.k_head(), cache.v_head(), hd, 0.1f, scratch.data());
    for (int i = 0; i < n; ++i) {
      AttentionQuery one{&q[i * hd], alone.data(), lens[i]};
      attention_multi(&one, 1, cache.k_head(), cache.v_head(), hd, 0.1f, scratch.data());
      EXPECT_EQ(0, std::memcmp(alone.data(), &together[i * hd], hd * sizeof(float)))
          << "query " << i;
    }
    // And the same query through another layout of the same values gives the same bits.
    if (lay.k_dim_major) {
      Cache rows(Dtype::kF16, hd, max_kv, 21, {false, lay.block_size});
      std::vector<float> other(hd);
      AttentionQuery one{&q[0], other.data(), lens[0]};
      attention_multi(&one, 1, rows.k_head(), rows.v_head(), hd, 0.1f, scratch.data());
      EXPECT_EQ(0, std::memcmp(other.data(), &together[0], hd * sizeof(float)))
          << "block " << lay.block_size;
    }
  }
}

// Several KV heads in one call (a decode step's tasks): each head's queries get the bits one
// call per head gives them, and match the reference.
TEST_P(AttentionMulti, SeveralHeadsInOneCallMatchOneCallPerHead) {
  const int64_t hd = 128;
  const int32_t max_kv = 100;
  for (const int per_head : {1, 2, 5}) {
    std::vector<Cache> caches;
    for (int h = 0; h < 3; ++h)
      caches.emplace_back(Dtype::kF16, hd, max_kv, 40 + h, kLayouts[h % std::size(kLayouts)]);
    const int n = 3 * per_head;
    const auto q = random_normal(n * hd, 5, 0.6f);
    std::mt19937 rng(per_head);
    std::vector<int32_t> lens(n);
    for (auto& l : lens) l = 1 + rng() % max_kv;
    std::vector<float> together(n * hd), alone(n * hd), want(hd);
    std::vector<AttentionQuery> qs, singles;
    for (int i = 0; i < n; ++i) {
      qs.push_back({&q[i * hd], &together[i * hd], lens[i]});
      singles.push_back({&q[i * hd], &alone[i * hd], lens[i]});
    }
    PagedHead k[3], v[3];
    for (int h = 0; h < 3; ++h) {
      k[h] = caches[h].k_head();
      v[h] = caches[h].v_head();
    }
    std::vector<float> scratch(attention_scratch_floats(n, max_kv, hd));
    attention_multi_heads(qs.data(), n, k, v, 3, hd, 0.2f, scratch.data());
    for (int h = 0; h < 3; ++h)
      attention_multi(&singles[h * per_head], per_head, k[h], v[h], hd, 0.2f, scratch.data());
    for (int i = 0; i < n; ++i) {
      const int h = i / per_head;
      EXPECT_EQ(0, std::memcmp(&alone[i * hd], &together[i * hd], hd * sizeof(float)))
          << "query " << i << " of head " << h;
      ref::attention(&q[i * hd], k[h], v[h], hd, lens[i], 0.2f, want.data());
      EXPECT_LT(rel_error(&together[i * hd], want.data(), hd), 2e-6) << "query " << i;
    }
  }
}

// Sliding-window queries ([kv_begin, n_kv)) mixed in one call with unwindowed ones: windows
// starting inside the first block, at block and tile boundaries (8, 16, 24, 32, 48) and at
// n_kv - 1. Each matches the reference over its window and differs from attending over all
// of [0, n_kv), so a kernel ignoring kv_begin fails.
TEST_P(AttentionMulti, WindowedQueriesMatchReference) {
  struct Range {
    int32_t begin, n_kv;
  };
  const std::vector<Range> ranges = {{0, 100},  {5, 100}, {16, 77},  {0, 33},  {24, 60},
                                     {99, 100}, {8, 9},   {32, 100}, {17, 50}, {48, 64},
                                     {76, 77},  {3, 4},   {0, 1}};
  const int32_t max_kv = 100;
  for (const Layout& lay : kLayouts)
    for (Dtype dt : {Dtype::kF32, Dtype::kF16, Dtype::kBF16})
      for (int64_t hd : {16, 64, 80, 128, 256}) {
        Cache cache(dt, hd, max_kv, 12, lay);
        // Scores of about one unit: every token dropped from a window moves the result.
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        const auto q = random_normal(ranges.size() * hd, 6);
        std::vector<float> out(ranges.size() * hd), want(hd), all(hd);
        std::vector<AttentionQuery> qs;
        for (size_t i = 0; i < ranges.size(); ++i)
          qs.push_back({&q[i * hd], &out[i * hd], ranges[i].n_kv, ranges[i].begin});
        std::vector<float> scratch(attention_scratch_floats(qs.size(), max_kv, hd));
        attention_multi(qs.data(), qs.size(), cache.k_head(), cache.v_head(), hd, scale,
                        scratch.data());
        for (size_t i = 0; i < ranges.size(); ++i) {
          const auto [begin, n_kv] = ranges[i];
          ref::attention(&q[i * hd], cache.k_head(), cache.v_head(), hd, n_kv, scale, want.data(),
                         begin);
          EXPECT_LT(rel_error(&out[i * hd], want.data(), hd), 2e-6)
              << dtype_name(dt) << " head_dim=" << hd << " window [" << begin << ", " << n_kv
              << ") K " << (lay.k_dim_major ? "dim-major" : "rows") << " block " << lay.block_size;
          if (begin == 0) continue;
          ref::attention(&q[i * hd], cache.k_head(), cache.v_head(), hd, n_kv, scale, all.data());
          EXPECT_GT(rel_error(&out[i * hd], all.data(), hd), 1e-2)
              << "window [" << begin << ", " << n_kv << ") gave the unwindowed result";
        }
      }
}

// A window's tokens alone are read: with the blocks wholly before the call's lowest kv_begin
// pointing far past the cache (as if freed), the calls neither fault (in a child process)
// nor change a bit. Decode-sized (1-2 queries) and prefill-sized calls.
TEST_P(AttentionMulti, WindowReadsNothingBeforeIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const int32_t max_kv = 130;
  const auto run_all = [&](bool poisoned) {
    std::vector<float> all;
    for (const Layout& lay : kLayouts)
      for (Dtype dt : {Dtype::kF32, Dtype::kF16, Dtype::kBF16})
        for (int64_t hd : {64, 128})
          for (int32_t lo : {40, 48, 64, 129}) {
            Cache cache(dt, hd, max_kv, 13, lay);
            if (poisoned) cache.poison_before(lo);
            for (int n : {1, 2, 7}) {
              const auto q = random_normal(n * hd, 7, 0.6f);
              std::vector<float> out(n * hd);
              std::vector<AttentionQuery> qs;
              for (int i = 0; i < n; ++i)
                qs.push_back(
                    {&q[i * hd], &out[i * hd], max_kv - i % 2, std::min(lo + 3 * i, max_kv - 1)});
              std::vector<float> scratch(attention_scratch_floats(n, max_kv, hd));
              prefetch_attention(cache.k_head(), cache.v_head(), max_kv, hd, lo);
              attention_multi(qs.data(), n, cache.k_head(), cache.v_head(), hd, 0.3f,
                              scratch.data());
              all.insert(all.end(), out.begin(), out.end());
            }
          }
    return all;
  };
  const std::vector<float> clean = run_all(false);
  EXPECT_EXIT(
      {
        const std::vector<float> poisoned = run_all(true);
        std::exit(std::memcmp(poisoned.data(), clean.data(), clean.size() * sizeof(float)) ? 1 : 0);
      },
      ::testing::ExitedWithCode(0), "");
}

// Logit soft-capping: scores become softcap * tanh(score / softcap). A cap of 2 (well inside
// the scores' range, so tanh bends them) and Gemma 2's 50, with and without windows.
TEST_P(AttentionMulti, SoftcapMatchesReference) {
  const int32_t max_kv = 90;
  const std::vector<int32_t> lens = {90, 1, 17, 64, 33, 90};
  const std::vector<int32_t> begins = {0, 0, 0, 16, 20, 89};
  for (const Layout& lay : kLayouts)
    for (Dtype dt : {Dtype::kF32, Dtype::kF16, Dtype::kBF16})
      for (int64_t hd : {16, 64, 80, 128, 256})
        for (float cap : {50.0f, 2.0f}) {
          Cache cache(dt, hd, max_kv, 14, lay);
          // Scores of several units at every head size: soft-capping at 2 matters.
          const float scale = 3.0f / std::sqrt(static_cast<float>(hd));
          const auto q = random_normal(lens.size() * hd, 8);
          std::vector<float> out(lens.size() * hd), want(hd), uncapped(hd);
          std::vector<AttentionQuery> qs;
          for (size_t i = 0; i < lens.size(); ++i)
            qs.push_back({&q[i * hd], &out[i * hd], lens[i], begins[i]});
          std::vector<float> scratch(attention_scratch_floats(qs.size(), max_kv, hd));
          attention_multi(qs.data(), qs.size(), cache.k_head(), cache.v_head(), hd, scale,
                          scratch.data(), cap);
          for (size_t i = 0; i < lens.size(); ++i) {
            ref::attention(&q[i * hd], cache.k_head(), cache.v_head(), hd, lens[i], scale,
                           want.data(), begins[i], cap);
            EXPECT_LT(rel_error(&out[i * hd], want.data(), hd), 4e-6)
                << dtype_name(dt) << " head_dim=" << hd << " softcap=" << cap << " window ["
                << begins[i] << ", " << lens[i] << ") K "
                << (lay.k_dim_major ? "dim-major" : "rows") << " block " << lay.block_size;
            if (cap == 2.0f && lens[i] - begins[i] > 1) {
              ref::attention(&q[i * hd], cache.k_head(), cache.v_head(), hd, lens[i], scale,
                             uncapped.data(), begins[i]);
              EXPECT_GT(rel_error(&out[i * hd], uncapped.data(), hd), 1e-2)
                  << "softcap 2 gave the uncapped result";
            }
          }
        }
}

// Batch invariance with windows and soft-capping: a windowed query alone (whose call reads from
// its own window's tile) gets the bits it gets among queries reading from token 0, in one head
// or several.
TEST_P(AttentionMulti, WindowedQueryDoesNotDependOnTheOtherQueries) {
  const int64_t hd = 128;
  const int32_t max_kv = 200;
  for (const Layout& lay : kLayouts)
    for (Dtype dt : {Dtype::kF16, Dtype::kBF16, Dtype::kF32})
      for (float cap : {0.0f, 30.0f}) {
        std::vector<Cache> caches;
        for (int h = 0; h < 2; ++h) caches.emplace_back(dt, hd, max_kv, 50 + h, lay);
        PagedHead k[2] = {caches[0].k_head(), caches[1].k_head()};
        PagedHead v[2] = {caches[0].v_head(), caches[1].v_head()};
        const int n = 2 * 9;
        const auto q = random_normal(n * hd, 9, 0.6f);
        std::mt19937 rng(lay.block_size + static_cast<int>(cap));
        std::vector<int32_t> lens(n), begins(n);
        for (int i = 0; i < n; ++i) {
          lens[i] = 1 + rng() % max_kv;
          // Every third query unwindowed, so the call reads from token 0.
          begins[i] = i % 3 == 0 ? 0 : rng() % lens[i];
        }
        std::vector<float> together(n * hd), alone(hd);
        std::vector<AttentionQuery> qs;
        for (int i = 0; i < n; ++i)
          qs.push_back({&q[i * hd], &together[i * hd], lens[i], begins[i]});
        std::vector<float> scratch(attention_scratch_floats(n, max_kv, hd));
        attention_multi_heads(qs.data(), n, k, v, 2, hd, 0.1f, scratch.data(), cap);
        for (int i = 0; i < n; ++i) {
          const int h = i / (n / 2);
          AttentionQuery one{&q[i * hd], alone.data(), lens[i], begins[i]};
          attention_multi(&one, 1, k[h], v[h], hd, 0.1f, scratch.data(), cap);
          EXPECT_EQ(0, std::memcmp(alone.data(), &together[i * hd], hd * sizeof(float)))
              << dtype_name(dt) << " query " << i << " window [" << begins[i] << ", " << lens[i]
              << ") softcap " << cap << " block " << lay.block_size;
        }
        // Within one head too: the first head's queries in a call of their own.
        std::vector<float> head0(n / 2 * hd);
        std::vector<AttentionQuery> first;
        for (int i = 0; i < n / 2; ++i)
          first.push_back({&q[i * hd], &head0[i * hd], lens[i], begins[i]});
        attention_multi(first.data(), n / 2, k[0], v[0], hd, 0.1f, scratch.data(), cap);
        EXPECT_EQ(0, std::memcmp(head0.data(), together.data(), head0.size() * sizeof(float)));
      }
}

INSTANTIATE_TEST_SUITE_P(EveryIsa, AttentionMulti, ::testing::ValuesIn(available_isas()),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

}  // namespace
}  // namespace loom::kernels
