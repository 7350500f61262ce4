// Multi-query paged attention against the scalar double reference on every ISA, and the batch
// invariance it promises: a query's output is bit-identical alone or among many others.
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <cstring>
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
// cache's layout, model/kv_cache.h) with a given block size.
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
    for (int32_t i = 0; i < n_blocks; ++i) table.push_back((i * 7 + 3) % n_blocks);  // scrambled
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

INSTANTIATE_TEST_SUITE_P(EveryIsa, AttentionMulti, ::testing::ValuesIn(available_isas()),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

}  // namespace
}  // namespace loom::kernels
