// The fast element-wise / attention ops against their scalar double references on random data.
#include "kernels/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "kernels/ref/ops_ref.h"

namespace loom::kernels {
namespace {

std::vector<float> random_vec(std::mt19937& rng, int64_t n, float lo = -2.0f, float hi = 2.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// max|a-b| / max|b|
double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::fmax(num, std::fabs(static_cast<double>(a[i]) - b[i]));
    den = std::fmax(den, std::fabs(static_cast<double>(b[i])));
  }
  return num / den;
}

TEST(OpsTest, RmsNormMatchesReference) {
  std::mt19937 rng(1);
  for (int64_t n : {1, 7, 64, 100, 4096}) {
    auto x = random_vec(rng, n), w = random_vec(rng, n);
    std::vector<float> a(n), b(n);
    rms_norm(x.data(), w.data(), a.data(), n, 1e-5f);
    ref::rms_norm(x.data(), w.data(), b.data(), n, 1e-5f);
    EXPECT_LT(rel_err(a, b), 1e-6) << n;
  }
}

TEST(OpsTest, RopeMatchesReferenceBothLayouts) {
  std::mt19937 rng(2);
  for (bool neox : {false, true}) {
    for (int64_t hd : {16, 64, 128}) {
      auto inv = random_vec(rng, hd / 2, 0.0001f, 1.0f);
      auto x = random_vec(rng, 3 * hd);
      auto a = x, b = x;
      for (int32_t pos : {0, 1, 17, 4000}) {
        rope(a.data(), 3, hd, pos, inv.data(), neox);
        ref::rope(b.data(), 3, hd, pos, inv.data(), neox);
        EXPECT_LT(rel_err(a, b), 1e-5) << neox << " " << hd << " " << pos;
      }
    }
  }
}

TEST(OpsTest, RopeLayoutsRotateDifferentPairs) {
  // Same data, different pairing: the results must differ (guards against a no-op flag).
  std::mt19937 rng(3);
  auto inv = random_vec(rng, 8, 0.1f, 1.0f);
  auto x = random_vec(rng, 16);
  auto a = x, b = x;
  rope(a.data(), 1, 16, 5, inv.data(), true);
  rope(b.data(), 1, 16, 5, inv.data(), false);
  EXPECT_GT(rel_err(a, b), 1e-3);
  // Position 0 is the identity.
  auto c = x;
  rope(c.data(), 1, 16, 0, inv.data(), true);
  EXPECT_EQ(c, x);
}

// vec_dot / vec_axpy (MLA's latent attention) against double sums, at lengths with and without
// a tail of the vector width; load_kv of f16 / bf16 rows is exact (the conversion widens).
TEST(OpsTest, VecDotAxpyAndLoadKvMatchReference) {
  std::mt19937 rng(5);
  for (int64_t n : {1, 7, 16, 40, 288, 515}) {
    auto a = random_vec(rng, n), b = random_vec(rng, n), y = random_vec(rng, n);
    double want = 0;
    for (int64_t i = 0; i < n; ++i) want += static_cast<double>(a[i]) * b[i];
    EXPECT_NEAR(vec_dot(a.data(), b.data(), n), want, 1e-5 * (1 + std::sqrt(double(n)))) << n;
    auto got = y;
    vec_axpy(0.37f, a.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(got[i], y[i] + 0.37 * a[i], 1e-6) << n;
    for (Dtype dt : {Dtype::kF16, Dtype::kBF16}) {
      std::vector<uint16_t> stored(n);
      std::vector<float> back(n), want_back(n);
      store_kv(dt, a.data(), stored.data(), n);
      load_kv(dt, stored.data(), back.data(), n);
      for (int64_t i = 0; i < n; ++i)
        want_back[i] = dt == Dtype::kF16 ? fp16_to_f32(stored[i]) : bf16_to_f32(stored[i]);
      EXPECT_EQ(back, want_back) << n;
    }
  }
}

TEST(OpsTest, SoftmaxAndSiluMatchReference) {
  std::mt19937 rng(4);
  for (int64_t n : {1, 5, 300}) {
    auto x = random_vec(rng, n, -20.0f, 20.0f);
    auto a = x, b = x;
    softmax(a.data(), n);
    ref::softmax(b.data(), n);
    EXPECT_LT(rel_err(a, b), 1e-6);
    auto g = random_vec(rng, n, -8.0f, 8.0f), u = random_vec(rng, n);
    std::vector<float> c(n), d(n);
    silu_mul(g.data(), u.data(), c.data(), n);
    ref::silu_mul(g.data(), u.data(), d.data(), n);
    EXPECT_LT(rel_err(c, d), 1e-6);
  }
}

TEST(OpsTest, PagedAttentionMatchesReferenceForEveryKvDtype) {
  std::mt19937 rng(5);
  const int64_t hd = 32, n_head_kv = 2, block_size = 4, num_blocks = 8;
  // Scrambled block table: logical block i lives in physical block table[i].
  const std::vector<int32_t> table = {5, 2, 7, 0, 3, 6, 1, 4};
  for (Dtype dt : {Dtype::kF32, Dtype::kF16, Dtype::kBF16}) {
    const uint64_t esize = dt == Dtype::kF32 ? 4 : 2;
    const uint64_t token_stride = n_head_kv * hd * esize;
    const uint64_t block_stride = block_size * token_stride;
    std::vector<uint8_t> kbuf(num_blocks * block_stride), vbuf(num_blocks * block_stride);
    for (int64_t t = 0; t < num_blocks * block_size * n_head_kv; ++t) {
      auto r = random_vec(rng, hd);
      store_kv(dt, r.data(), kbuf.data() + t * hd * esize, hd);
      r = random_vec(rng, hd);
      store_kv(dt, r.data(), vbuf.data() + t * hd * esize, hd);
    }
    for (int64_t h = 0; h < n_head_kv; ++h) {
      PagedHead k{
          kbuf.data() + h * hd * esize, dt, table.data(), block_size, block_stride, token_stride};
      PagedHead v{
          vbuf.data() + h * hd * esize, dt, table.data(), block_size, block_stride, token_stride};
      for (int32_t n_kv : {1, 3, 4, 17, 32}) {
        auto q = random_vec(rng, hd);
        std::vector<float> a(hd), b(hd), scratch(n_kv + hd);
        attention(q.data(), k, v, hd, n_kv, 0.25f, scratch.data(), a.data());
        ref::attention(q.data(), k, v, hd, n_kv, 0.25f, b.data());
        EXPECT_LT(rel_err(a, b), 1e-5) << dtype_name(dt) << " n_kv=" << n_kv;
      }
    }
  }
}

TEST(OpsTest, KvStoreRoundTrip) {
  std::mt19937 rng(6);
  auto x = random_vec(rng, 64);
  for (Dtype dt : {Dtype::kF32, Dtype::kF16, Dtype::kBF16}) {
    std::vector<uint8_t> buf(64 * 4);
    std::vector<float> y(64);
    store_kv(dt, x.data(), buf.data(), 64);
    load_kv(dt, buf.data(), y.data(), 64);
    double tol = dt == Dtype::kF32 ? 0 : dt == Dtype::kF16 ? 1e-3 : 8e-3;
    EXPECT_LE(rel_err(y, x), tol) << dtype_name(dt);
  }
}

}  // namespace
}  // namespace loom::kernels
