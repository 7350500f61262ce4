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

// One KV head of a scrambled paged cache filled with random K/V.
struct Cache {
  static constexpr int32_t kBlockSize = 16;
  Dtype dtype;
  int64_t head_dim;
  std::vector<int32_t> table;
  std::vector<uint8_t> k, v;
  uint64_t token_stride, block_stride;

  Cache(Dtype dt, int64_t hd, int32_t n_tokens, uint32_t seed) : dtype(dt), head_dim(hd) {
    const int32_t n_blocks = (n_tokens + kBlockSize - 1) / kBlockSize;
    for (int32_t i = 0; i < n_blocks; ++i) table.push_back((i * 7 + 3) % n_blocks);  // scrambled
    const uint64_t esize = dt == Dtype::kF32 ? 4 : 2;
    token_stride = 2 * hd * esize;  // two KV heads per token; this one is the second
    block_stride = kBlockSize * token_stride;
    k.resize(n_blocks * block_stride);
    v.resize(n_blocks * block_stride);
    const auto kr = random_normal(n_blocks * kBlockSize * 2 * hd, seed);
    const auto vr = random_normal(n_blocks * kBlockSize * 2 * hd, seed + 1);
    for (int64_t t = 0; t < n_blocks * kBlockSize * 2; ++t) {
      store_kv(dt, &kr[t * hd], k.data() + t * hd * esize, hd);
      store_kv(dt, &vr[t * hd], v.data() + t * hd * esize, hd);
    }
  }
  PagedHead head(const std::vector<uint8_t>& buf) const {
    const uint64_t esize = dtype == Dtype::kF32 ? 4 : 2;
    return PagedHead{
        buf.data() + head_dim * esize, dtype, table.data(), kBlockSize, block_stride, token_stride};
  }
};

class AttentionMulti : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override { set_active_isa(GetParam()); }
  void TearDown() override { set_active_isa(best_isa()); }
};

TEST_P(AttentionMulti, MatchesReferenceForEveryKvDtypeAndHeadSize) {
  for (Dtype dt : {Dtype::kF32, Dtype::kF16, Dtype::kBF16}) {
    for (int64_t hd : {16, 64, 80, 128, 256}) {
      const int32_t max_kv = 77;
      Cache cache(dt, hd, max_kv, 11);
      // Queries of many lengths (1 .. max_kv), scores large enough to make softmax peaky.
      const std::vector<int32_t> lens = {1, 2, 15, 16, 17, 33, 64, 77, 5};
      const auto q = random_normal(lens.size() * hd, 3, 0.6f);
      std::vector<float> out(lens.size() * hd), want(hd);
      std::vector<AttentionQuery> qs;
      for (size_t i = 0; i < lens.size(); ++i) qs.push_back({&q[i * hd], &out[i * hd], lens[i]});
      std::vector<float> scratch(attention_scratch_floats(qs.size(), max_kv, hd));
      attention_multi(qs.data(), qs.size(), cache.head(cache.k), cache.head(cache.v), hd, 0.3f,
                      scratch.data());
      for (size_t i = 0; i < lens.size(); ++i) {
        ref::attention(&q[i * hd], cache.head(cache.k), cache.head(cache.v), hd, lens[i], 0.3f,
                       want.data());
        EXPECT_LT(rel_error(&out[i * hd], want.data(), hd), 2e-6)
            << dtype_name(dt) << " head_dim=" << hd << " n_kv=" << lens[i];
      }
    }
  }
}

TEST_P(AttentionMulti, QueryResultDoesNotDependOnTheOtherQueries) {
  const int64_t hd = 128;
  const int32_t max_kv = 150;
  Cache cache(Dtype::kF16, hd, max_kv, 21);
  const int n = 24;
  const auto q = random_normal(n * hd, 4);
  std::mt19937 rng(9);
  std::vector<int32_t> lens(n);
  for (auto& l : lens) l = 1 + rng() % max_kv;
  std::vector<float> together(n * hd), alone(hd);
  std::vector<AttentionQuery> qs;
  for (int i = 0; i < n; ++i) qs.push_back({&q[i * hd], &together[i * hd], lens[i]});
  std::vector<float> scratch(attention_scratch_floats(n, max_kv, hd));
  attention_multi(qs.data(), n, cache.head(cache.k), cache.head(cache.v), hd, 0.1f, scratch.data());
  for (int i = 0; i < n; ++i) {
    AttentionQuery one{&q[i * hd], alone.data(), lens[i]};
    attention_multi(&one, 1, cache.head(cache.k), cache.head(cache.v), hd, 0.1f, scratch.data());
    EXPECT_EQ(0, std::memcmp(alone.data(), &together[i * hd], hd * sizeof(float))) << "query " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryIsa, AttentionMulti, ::testing::ValuesIn(available_isas()),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

}  // namespace
}  // namespace loom::kernels
