// kRows16-packed Q8_0 / Q4_0 / Q4_K / Q6_K / F16 / BF16 matrices (kernels/packed.h): the packed
// matmul agrees with the row-layout matmul and the reference within the int8-activation bound, and
// keeps batch invariance (a token's output bit-identical alone, in any batch, on 1 or 2 threads).
#include "kernels/packed.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu/isa.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernels/ref/ref.h"
#include "test_util.h"

namespace loom::kernels {
namespace {

using Matrix = testing::QuantizedMatrix;

Matrix make_matrix(Dtype t, int64_t rows, int64_t cols, uint32_t seed) {
  return testing::quantized_matrix(t, rows, cols, seed);
}

// Reference out[t][r] in double from the dequantized weights.
std::vector<double> reference(const TensorView& w, const std::vector<float>& x, int64_t nt) {
  const int64_t rows = w.rows(), cols = w.cols();
  std::vector<float> wr(cols);
  std::vector<double> out(nt * rows);
  for (int64_t r = 0; r < rows; ++r) {
    ref::dequantize_row(w.dtype, w.row(r), wr.data(), cols);
    for (int64_t t = 0; t < nt; ++t) {
      double s = 0;
      for (int64_t k = 0; k < cols; ++k) s += double(wr[k]) * x[t * cols + k];
      out[t * rows + r] = s;
    }
  }
  return out;
}

class Packed : public ::testing::TestWithParam<Dtype> {
 protected:
  void SetUp() override {
    if (best_isa() != Isa::kAvx512) GTEST_SKIP() << "packing needs AVX-512 VNNI";
    if (GetParam() == Dtype::kBF16 && !cpu_features().avx512bf16) GTEST_SKIP() << "no AVX512-BF16";
  }
};

TEST_P(Packed, MatchesReferenceAndRowLayout) {
  ThreadPool pool(2);
  for (int64_t rows : {16, 37, 301}) {  // whole groups, a padded last group
    const int64_t cols = 256;
    Matrix m = make_matrix(GetParam(), rows, cols, 5 + rows);
    if (!packable(m.view)) GTEST_SKIP() << dtype_name(GetParam()) << " is not packed on this CPU";
    const PackedMatrix p = PackedMatrix::pack_rows16(m.view);
    EXPECT_EQ(p.view().layout, TensorLayout::kRows16);
    EXPECT_EQ(p.view().nbytes, (rows + 15) / 16 * PackedMatrix::group_bytes(GetParam(), cols));
    for (int64_t nt : {1, 5, 8, 19}) {
      const auto x = testing::random_normal(nt * cols, 9 + nt);
      std::vector<float> packed(nt * rows), plain(nt * rows);
      matmul(p.view(), x.data(), nt, packed.data(), &pool);
      matmul(m.view, x.data(), nt, plain.data(), &pool);
      const auto want = reference(m.view, x, nt);
      double worst = 0, worst_plain = 0, scale = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, std::abs(packed[i] - want[i]));
        worst_plain = std::max(worst_plain, std::abs(plain[i] - want[i]));
        scale = std::max(scale, std::abs(want[i]));
      }
      // Both see the same int8 activations; only the float summation order differs.
      EXPECT_LT(worst / scale, 1e-2) << rows << "x" << cols << " tokens " << nt;
      EXPECT_LT(worst, 2 * worst_plain + 1e-4 * scale) << rows << " rows, tokens " << nt;
    }
  }
}

TEST_P(Packed, TokenResultIndependentOfBatchAndThreads) {
  const int64_t rows = 301, cols = 512, nt = 70;  // > 64: the prefill loop order (matmul.cpp)
  Matrix m = make_matrix(GetParam(), rows, cols, 77);
  const PackedMatrix p = PackedMatrix::pack_rows16(m.view);
  const auto x = testing::random_normal(nt * cols, 78);
  ThreadPool one(1), two(2);
  std::vector<float> all(nt * rows), alone(rows);
  matmul(p.view(), x.data(), nt, all.data(), &two);
  for (int64_t t = 0; t < nt; ++t) {
    for (ThreadPool* pool : {&one, &two}) {
      matmul(p.view(), &x[t * cols], 1, alone.data(), pool);
      ASSERT_EQ(0, std::memcmp(alone.data(), &all[t * rows], rows * sizeof(float)))
          << "token " << t;
    }
  }
  // And inside a batch of a different size (the token at another tile position).
  std::vector<float> part(7 * rows);
  matmul(p.view(), &x[3 * cols], 7, part.data(), &one);
  EXPECT_EQ(0, std::memcmp(part.data(), &all[3 * rows], 7 * rows * sizeof(float)));
}

TEST_P(Packed, MultiSharesActivationsAndMatchesSingleCalls) {
  ThreadPool pool(2);
  const int64_t cols = 256, nt = 11;  // one K-quant super-block
  Matrix a = make_matrix(GetParam(), 48, cols, 1), b = make_matrix(GetParam(), 21, cols, 2);
  const PackedMatrix pa = PackedMatrix::pack_rows16(a.view), pb = PackedMatrix::pack_rows16(b.view);
  const auto x = testing::random_normal(nt * cols, 3);
  std::vector<float> oa(nt * 48), ob(nt * 21), sa(nt * 48), sb(nt * 21), rb(nt * 21);
  const MatmulTarget targets[] = {{&pa.view(), oa.data()}, {&pb.view(), ob.data()}};
  matmul_multi(targets, 2, x.data(), nt, &pool);
  matmul(pa.view(), x.data(), nt, sa.data(), &pool);
  matmul(pb.view(), x.data(), nt, sb.data(), &pool);
  EXPECT_EQ(oa, sa);
  EXPECT_EQ(ob, sb);
  // A packed and a row-layout matrix together: each still gets its own result.
  const MatmulTarget mixed[] = {{&pa.view(), oa.data()}, {&b.view, ob.data()}};
  matmul_multi(mixed, 2, x.data(), nt, &pool);
  matmul(b.view, x.data(), nt, rb.data(), &pool);
  EXPECT_EQ(oa, sa);
  EXPECT_EQ(ob, rb);
}

// Two packed matrices of (possibly) different dtypes in one matmul_multi call: each gets what
// a call of its own gives.
void expect_multi_matches_single_calls(Dtype ta, int64_t rows_a, Dtype tb, int64_t rows_b,
                                       int64_t cols, int64_t nt, uint32_t seed) {
  ThreadPool pool(2);
  Matrix a = make_matrix(ta, rows_a, cols, seed), b = make_matrix(tb, rows_b, cols, seed + 1);
  const PackedMatrix pa = PackedMatrix::pack_rows16(a.view), pb = PackedMatrix::pack_rows16(b.view);
  const auto x = testing::random_normal(nt * cols, seed + 2);
  std::vector<float> oa(nt * rows_a), ob(nt * rows_b), sa(nt * rows_a), sb(nt * rows_b);
  const MatmulTarget targets[] = {{&pa.view(), oa.data()}, {&pb.view(), ob.data()}};
  matmul_multi(targets, 2, x.data(), nt, &pool);
  matmul(pa.view(), x.data(), nt, sa.data(), &pool);
  matmul(pb.view(), x.data(), nt, sb.data(), &pool);
  EXPECT_EQ(oa, sa) << dtype_name(ta);
  EXPECT_EQ(ob, sb) << dtype_name(tb);
}

TEST(PackedMixed, F16AndQ8_0InOneMultiCallEachGetTheirOwnResult) {
  if (best_isa() != Isa::kAvx512) GTEST_SKIP() << "packing needs AVX-512 VNNI";
  expect_multi_matches_single_calls(Dtype::kF16, 40, Dtype::kQ8_0, 33, 256, 9, 11);
}

// A Q4_K_M layer: q/k in Q4_K and v in Q6_K share one activation quantization.
TEST(PackedMixed, Q4_KAndQ6_KInOneMultiCallEachGetTheirOwnResult) {
  if (best_isa() != Isa::kAvx512) GTEST_SKIP() << "packing needs AVX-512 VNNI";
  expect_multi_matches_single_calls(Dtype::kQ4_K, 50, Dtype::kQ6_K, 24, 512, 13, 21);
}

INSTANTIATE_TEST_SUITE_P(Q8_0Q4_0F16, Packed,
                         ::testing::Values(Dtype::kQ8_0, Dtype::kQ4_0, Dtype::kQ4_K, Dtype::kQ5_K,
                                           Dtype::kQ6_K, Dtype::kF16, Dtype::kBF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace loom::kernels
