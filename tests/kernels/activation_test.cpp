// kernels/activation.h against kernels/ref on random data, on every ISA the machine has.
#include "kernels/activation.h"

#include <gtest/gtest.h>

#include "kernels/cpu/isa.h"
#include "kernels/ops.h"
#include "kernels/ref/ops_ref.h"
#include "test_util.h"

namespace loom::kernels {
namespace {

using testing::random_normal;
using testing::rel_error;

class ActivationTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override { set_active_isa(GetParam()); }
  void TearDown() override { set_active_isa(best_isa()); }
};

TEST_P(ActivationTest, GeluTanhMulMatchesReference) {
  for (int64_t n : {1, 15, 16, 17, 300, 6912}) {
    auto g = random_normal(n, 11 + n, 3.0f), u = random_normal(n, 12 + n);
    std::vector<float> a(n), b(n);
    gelu_tanh_mul(g.data(), u.data(), a.data(), n);
    ref::gelu_tanh_mul(g.data(), u.data(), b.data(), n);
    EXPECT_LT(rel_error(a.data(), b.data(), n), 2e-6) << n;
    // In place (out aliases gate), as the forward pass calls it.
    gelu_tanh_mul(g.data(), u.data(), g.data(), n);
    EXPECT_EQ(g, a) << n;
  }
}

TEST_P(ActivationTest, SoftcapMatchesReferenceAndBounds) {
  for (float cap : {30.0f, 2.0f}) {
    const int64_t n = 1000;
    auto x = random_normal(n, 21, 40.0f), y = x;
    softcap(x.data(), n, cap);
    ref::softcap(y.data(), n, cap);
    EXPECT_LT(rel_error(x.data(), y.data(), n), 2e-6) << cap;
    for (float v : x) EXPECT_LE(std::fabs(v), cap) << cap;
  }
}

TEST_P(ActivationTest, PartialRopeMatchesReferenceAndLeavesTheRest) {
  const int64_t D = 32, R = 24, H = 3;
  for (bool neox : {true, false}) {
    auto x = random_normal(H * D, 31), y = x;
    auto ang = random_normal(R, 32);  // cs then sn (not unit: the op is linear in them)
    rope_rotate_partial(x.data(), H, D, R, ang.data(), ang.data() + R / 2, neox);
    ref::rope_rotate_partial(y.data(), H, D, R, ang.data(), ang.data() + R / 2, neox);
    EXPECT_LT(rel_error(x.data(), y.data(), x.size()), 1e-6);
    const auto orig = random_normal(H * D, 31);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = R; d < D; ++d) EXPECT_EQ(x[h * D + d], orig[h * D + d]);
    EXPECT_NE(x, orig);
  }
}

// Full RoPE of every head, both pair layouts, within the double reference, and the same bits
// on every ISA as the scalar loop (the AVX-512 path for head_dim a multiple of 32 rounds each
// product and then their sum, as the loop does); head_dim 48 takes the loop everywhere.
TEST_P(ActivationTest, RopeMatchesReferenceAndTheScalarLoopBitForBit) {
  const int64_t H = 3;
  for (int64_t D : {48, 64, 128}) {
    for (bool neox : {true, false}) {
      const auto orig = random_normal(H * D, 41 + D);
      const auto ang = random_normal(D, 42 + D);  // cs then sn (the op is linear in them)
      auto x = orig, y = orig, scalar = orig;
      rope_rotate(x.data(), H, D, ang.data(), ang.data() + D / 2, neox);
      ref::rope_rotate_partial(y.data(), H, D, D, ang.data(), ang.data() + D / 2, neox);
      EXPECT_LT(rel_error(x.data(), y.data(), x.size()), 1e-6) << D << " " << neox;
      set_active_isa(Isa::kScalar);
      rope_rotate(scalar.data(), H, D, ang.data(), ang.data() + D / 2, neox);
      set_active_isa(GetParam());
      EXPECT_EQ(x, scalar) << D << " " << neox;
      EXPECT_NE(x, orig);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, ActivationTest, ::testing::ValuesIn(available_isas()),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

}  // namespace
}  // namespace loom::kernels
