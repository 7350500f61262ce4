// kernels::matmul against the double-accumulating reference for every weight dtype on every
// ISA this CPU runs, and batch invariance (a token's output bit-identical alone or in a batch,
// on 1 or 2 threads).
#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu/isa.h"
#include "kernels/quant.h"
#include "kernels/ref/ref.h"
#include "test_util.h"

namespace loom::kernels {
namespace {

const Dtype kMatmulDtypes[] = {
    Dtype::kF32,  Dtype::kF16,   Dtype::kBF16,   Dtype::kQ8_0,   Dtype::kQ4_0,  Dtype::kQ4_1,
    Dtype::kQ5_0, Dtype::kQ5_1,  Dtype::kQ2_K,   Dtype::kQ3_K,   Dtype::kQ4_K,  Dtype::kQ5_K,
    Dtype::kQ6_K, Dtype::kMXFP4, Dtype::kIQ4_NL, Dtype::kIQ4_XS, Dtype::kTQ1_0, Dtype::kTQ2_0};

bool is_k_quant(Dtype t) {
  return dtype_info(t).block_size == 256;
}

// Error of matmul vs the reference (which uses the same dequantized weights, in double):
// what remains is the activation quantization (int8 per block) and float accumulation.
// Measured per element as |got - want| / (||w_r|| * ||x_t||): random vectors give dots of
// about 1/sqrt(cols) in these units, a wrong or misplaced element about 1/cols.
//
// BF16 on AVX512-BF16 (vdpbf16ps) rounds the activations to bf16 too: each x_k moves by at most
// 2^-8 |x_k| (8 significant bits, round to nearest), so by Cauchy-Schwarz the dot moves by at
// most 2^-8 ||w|| ||x||; the products themselves are exact in f32. Random data lands near
// 6e-4; a wrong element still costs ~1/cols (0.01 at 96 columns).
double bound_for(Dtype t, Isa isa) {
  switch (t) {
    case Dtype::kBF16:
      return isa == Isa::kAvx512 && cpu_features().avx512bf16 ? 1.0 / 256 + 1e-6 : 1e-6;
    case Dtype::kF32:
    case Dtype::kF16:
      return 1e-6;
    default:
      return 5e-3;
  }
}

double max_scaled_error(const TensorView& w, const float* x, int64_t nt, const float* got,
                        const float* want) {
  const int64_t rows = w.rows(), cols = w.cols();
  std::vector<float> wr(cols);
  std::vector<double> wn(rows), xn(nt);
  for (int64_t r = 0; r < rows; ++r) {
    ref::dequantize_row(w.dtype, w.row(r), wr.data(), cols);
    for (float v : wr) wn[r] += double(v) * v;
  }
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t k = 0; k < cols; ++k) xn[t] += double(x[t * cols + k]) * x[t * cols + k];
  double worst = 0;
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      const double e = std::abs(double(got[t * rows + r]) - want[t * rows + r]) /
                       std::sqrt(wn[r] * xn[t] + 1e-30);
      worst = std::max(worst, e);
    }
  return worst;
}

using Weights = testing::QuantizedMatrix;

Weights make_weights(Dtype t, int64_t rows, int64_t cols, uint32_t seed) {
  return testing::quantized_matrix(t, rows, cols, seed);
}

class IsaGuard {
 public:
  explicit IsaGuard(Isa isa) : saved_(active_isa()) { set_active_isa(isa); }
  ~IsaGuard() { set_active_isa(saved_); }

 private:
  Isa saved_;
};

TEST(Matmul, EveryDtypeMatchesReferenceOnEveryIsa) {
  ThreadPool pool(2);
  for (Isa isa : available_isas()) {
    IsaGuard guard(isa);
    for (Dtype t : kMatmulDtypes) {
      ASSERT_TRUE(matmul_supported(t));
      const int64_t cols = is_k_quant(t) ? 512 : 96;  // 96: an odd number of 32-blocks
      for (int64_t rows : {1, 7, 33}) {
        Weights w = make_weights(t, rows, cols, 17 + rows);
        for (int64_t nt : {1, 3, 17, 64}) {
          const auto x = testing::random_normal(nt * cols, 1000 + nt);
          std::vector<float> got(nt * rows, -1.0f), want(nt * rows);
          matmul(w.view, x.data(), nt, got.data(), &pool);
          ref::matmul(w.view, x.data(), nt, want.data());
          const double err = max_scaled_error(w.view, x.data(), nt, got.data(), want.data());
          EXPECT_LT(err, bound_for(t, isa))
              << dtype_name(t) << " isa=" << isa_name(isa) << " rows=" << rows << " tokens=" << nt;
        }
      }
    }
  }
}

TEST(Matmul, LargerShapeWithPool) {
  ThreadPool pool(2);
  for (Isa isa : available_isas()) {
    IsaGuard guard(isa);
    for (Dtype t : {Dtype::kQ8_0, Dtype::kQ4_K, Dtype::kQ6_K, Dtype::kF16}) {
      Weights w = make_weights(t, 301, 1024, 5);
      const int64_t nt = 19;
      const auto x = testing::random_normal(nt * 1024, 77);
      std::vector<float> got(nt * 301), want(nt * 301);
      matmul(w.view, x.data(), nt, got.data(), &pool);
      ref::matmul(w.view, x.data(), nt, want.data());
      EXPECT_LT(max_scaled_error(w.view, x.data(), nt, got.data(), want.data()), bound_for(t, isa))
          << dtype_name(t) << " " << isa_name(isa);
      // Over this many outputs the plain relative error is stable: int8 activations cost ~1%.
      EXPECT_LT(testing::rel_error(got.data(), want.data(), got.size()),
                bound_for(t, isa) < 1e-5 ? 1e-6 : 2e-2)
          << dtype_name(t) << " " << isa_name(isa);
    }
  }
}

TEST(Matmul, FloatWeightsAnyColumnCount) {
  // Float weights have no block size: the SIMD kernels finish a row with a partial (masked or
  // scalar) step, which must match the reference and stay batch invariant.
  ThreadPool pool(2);
  for (Isa isa : available_isas()) {
    IsaGuard guard(isa);
    for (Dtype t : {Dtype::kF32, Dtype::kF16, Dtype::kBF16}) {
      for (int64_t cols : {1, 15, 17, 50, 1000}) {
        const int64_t rows = 9, nt = 13;
        Weights w = make_weights(t, rows, cols, 7 + cols);
        const auto x = testing::random_normal(nt * cols, 70 + cols);
        std::vector<float> got(nt * rows), want(nt * rows), alone(rows);
        matmul(w.view, x.data(), nt, got.data(), &pool);
        ref::matmul(w.view, x.data(), nt, want.data());
        EXPECT_LT(max_scaled_error(w.view, x.data(), nt, got.data(), want.data()),
                  bound_for(t, isa))
            << dtype_name(t) << " " << isa_name(isa) << " cols=" << cols;
        for (int64_t tok = 0; tok < nt; ++tok) {
          matmul(w.view, x.data() + tok * cols, 1, alone.data(), nullptr);
          ASSERT_EQ(0, std::memcmp(alone.data(), got.data() + tok * rows, rows * 4))
              << dtype_name(t) << " " << isa_name(isa) << " cols=" << cols << " token " << tok;
        }
      }
    }
  }
}

TEST(Matmul, BatchInvariance) {
  ThreadPool pool1(1), pool2(2);
  const int64_t rows = 67, nt = 37;
  for (Isa isa : available_isas()) {
    IsaGuard guard(isa);
    for (Dtype t : kMatmulDtypes) {
      const int64_t cols = is_k_quant(t) ? 512 : 160;
      Weights w = make_weights(t, rows, cols, 3);
      const auto x = testing::random_normal(nt * cols, 4242);
      std::vector<float> batch2(nt * rows), batch1(nt * rows), alone(rows), alone_nopool(rows);
      matmul(w.view, x.data(), nt, batch2.data(), &pool2);
      matmul(w.view, x.data(), nt, batch1.data(), &pool1);
      ASSERT_EQ(0, std::memcmp(batch1.data(), batch2.data(), batch1.size() * 4))
          << dtype_name(t) << " " << isa_name(isa);
      for (int64_t tok = 0; tok < nt; ++tok) {
        matmul(w.view, x.data() + tok * cols, 1, alone.data(), &pool2);
        matmul(w.view, x.data() + tok * cols, 1, alone_nopool.data(), nullptr);
        ASSERT_EQ(0, std::memcmp(alone.data(), batch2.data() + tok * rows, rows * 4))
            << dtype_name(t) << " " << isa_name(isa) << " token " << tok;
        ASSERT_EQ(0, std::memcmp(alone.data(), alone_nopool.data(), rows * 4));
      }
      // Sub-batches that split differently (chunked prefill) agree too.
      std::vector<float> part(5 * rows);
      matmul(w.view, x.data() + 11 * cols, 5, part.data(), &pool2);
      ASSERT_EQ(0, std::memcmp(part.data(), batch2.data() + 11 * rows, part.size() * 4))
          << dtype_name(t) << " " << isa_name(isa);
    }
  }
}

TEST(Matmul, RowPairingDoesNotChangeResults) {
  // The 512-bit Q8_0/Q4_0 kernels put two weight rows in one register and pair an odd last row
  // with itself: a row's output must not depend on its partner, so the same rows seen through
  // a view shifted by one row (every pair changes) give bit-identical outputs. Every tiled
  // kernel must pass the same check (a row's neighbours in its tile change too).
  ThreadPool pool(2);
  const int64_t rows = 45, cols = 512, nt = 11;
  for (Isa isa : available_isas()) {
    IsaGuard guard(isa);
    for (Dtype t : kMatmulDtypes) {
      Weights w = make_weights(t, rows, cols, 31);
      const auto x = testing::random_normal(nt * cols, 32);
      std::vector<float> full(nt * rows), shifted(nt * (rows - 1));
      matmul(w.view, x.data(), nt, full.data(), &pool);
      TensorView v = w.view;
      v.ne[1] = rows - 1;
      v.data = w.view.row(1);
      v.nbytes = w.view.nbytes - w.view.row_stride();
      matmul(v, x.data(), nt, shifted.data(), nullptr);
      for (int64_t tok = 0; tok < nt; ++tok)
        ASSERT_EQ(0, std::memcmp(full.data() + tok * rows + 1, shifted.data() + tok * (rows - 1),
                                 (rows - 1) * sizeof(float)))
            << dtype_name(t) << " " << isa_name(isa) << " token " << tok;
    }
  }
}

TEST(Matmul, KQuantSimdMatchesScalarExactly) {
  // K-quant (and ternary) kernels keep whole super-blocks in exact integer sums, so every ISA must
  // agree with the generic path bit for bit. 1 token (decode), 5 and 13 (full and partial token
  // tiles) take different paths through the kernels.
  const int64_t rows = 21, cols = 768;
  for (Dtype t : {Dtype::kQ2_K, Dtype::kQ3_K, Dtype::kQ4_K, Dtype::kQ5_K, Dtype::kQ6_K,
                  Dtype::kTQ1_0, Dtype::kTQ2_0}) {
    Weights w = make_weights(t, rows, cols, 8);
    for (int64_t nt : {1, 5, 13}) {
      const auto x = testing::random_normal(nt * cols, 9);
      std::vector<float> want(nt * rows), got(nt * rows);
      {
        IsaGuard g(Isa::kScalar);
        matmul(w.view, x.data(), nt, want.data(), nullptr);
      }
      for (Isa isa : available_isas()) {
        IsaGuard g(isa);
        matmul(w.view, x.data(), nt, got.data(), nullptr);
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
            << dtype_name(t) << " " << isa_name(isa) << " tokens=" << nt;
      }
    }
  }
}

}  // namespace
}  // namespace loom::kernels
