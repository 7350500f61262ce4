// The AMX tile for packed BF16 matrices (kernels/cpu/packed_amx.cpp): against a double
// reference of the same bf16 values for every token count a tile takes, one and two groups, a
// partial group and column counts that are one chunk or many; a token's row is the same bits
// whatever the tile's token count; matmul runs it when AMX is on, and both paths (AMX on and
// off) stay within float rounding of the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu/act_quant.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/packed_kernels.h"
#include "kernels/matmul.h"
#include "kernels/packed.h"
#include "kernels/ref/ref.h"
#include "test_util.h"

namespace loom::kernels {
namespace {

bool has_amx() {
  return best_isa() == Isa::kAvx512 && cpu_features().amx_bf16;
}

// A packed BF16 matrix with its bf16 activation rows, and the double reference of the products
// of exactly those bf16 values (the float rounding of the sums is all a kernel may add).
struct Bf16Case {
  testing::QuantizedMatrix m;
  PackedMatrix packed;
  size_t x_stride;
  std::vector<uint8_t> act;
  std::vector<double> want, scale;  // per output: the sum, and the sum of |products|

  Bf16Case(int64_t rows, int64_t cols, int64_t nt, uint32_t seed)
      : m(testing::quantized_matrix(Dtype::kBF16, rows, cols, seed)),
        packed(PackedMatrix::pack_rows16(m.view)),
        x_stride(cpu::act_row_bytes(cpu::ActFormat::kBF16, cols)),
        act(nt * x_stride),
        want(nt * rows),
        scale(nt * rows) {
    const auto x = testing::random_normal(nt * cols, seed + 1);
    std::vector<float> w(cols), xr(cols);
    for (int64_t t = 0; t < nt; ++t)
      cpu::quantize_act_row(cpu::ActFormat::kBF16, &x[t * cols], cols, &act[t * x_stride]);
    for (int64_t r = 0; r < rows; ++r) {
      ref::dequantize_row(Dtype::kBF16, m.view.row(r), w.data(), cols);
      for (int64_t t = 0; t < nt; ++t) {
        ref::dequantize_row(Dtype::kBF16, &act[t * x_stride], xr.data(), cols);
        double s = 0, a = 0;
        for (int64_t k = 0; k < cols; ++k) {
          s += double(w[k]) * xr[k];
          a += std::abs(double(w[k]) * xr[k]);
        }
        want[t * rows + r] = s;
        scale[t * rows + r] = a;
      }
    }
  }

  cpu::PackedArgs args(float* out, int64_t first_token) const {
    cpu::PackedArgs a;
    a.w = static_cast<const uint8_t*>(packed.view().data);
    a.x = act.data() + first_token * x_stride;
    a.x_stride = x_stride;
    a.cols = m.view.cols();
    a.out = out;
    a.out_stride = m.view.rows();
    a.n_rows = static_cast<int>(m.view.rows());
    return a;
  }

  // Largest |got - want| in units of the output's sum of |products|, from token first_token on.
  double worst(const std::vector<float>& got, int64_t first_token, int64_t nt) const {
    const int64_t rows = m.view.rows();
    double worst = 0;
    for (int64_t i = 0; i < nt * rows; ++i) {
      const int64_t j = first_token * rows + i;
      worst = std::max(worst, std::abs(got[i] - want[j]) / scale[j]);
    }
    return worst;
  }
};

TEST(PackedAmx, Bf16TileMatchesReferenceForEveryTokenCount) {
  if (!has_amx()) GTEST_SKIP() << "no AMX-BF16 on this CPU (or not granted by the OS)";
  constexpr int kTok = cpu::kAmxTileTokens;
  for (int64_t cols : {32, 64, 96, 2080}) {  // 1, 2, 3 and 65 chunks of 32 columns
    for (int rows : {16, 29, 32}) {          // one group, a partial second, two
      const Bf16Case c(rows, cols, kTok, 100 + rows + cols);
      for (int n = 1; n <= kTok; ++n) {
        std::vector<float> out(n * rows + 1, -7.f);  // one float past the end stays put
        cpu::packed_tile_amx_bf16(c.args(out.data(), kTok - n), n);
        EXPECT_EQ(out.back(), -7.f);
        out.pop_back();
        EXPECT_LT(c.worst(out, kTok - n, n), 1e-6) << rows << "x" << cols << ", " << n << " tokens";
      }
    }
  }
}

TEST(PackedAmx, Bf16TokenRowIsTheSameInEveryTileSize) {
  if (!has_amx()) GTEST_SKIP() << "no AMX-BF16 on this CPU (or not granted by the OS)";
  constexpr int kTok = cpu::kAmxTileTokens;
  const int64_t rows = 29, cols = 512;
  const Bf16Case c(rows, cols, kTok, 7);
  std::vector<float> all(kTok * rows), one(rows);
  cpu::packed_tile_amx_bf16(c.args(all.data(), 0), kTok);
  for (int t = 0; t < kTok; ++t) {
    cpu::packed_tile_amx_bf16(c.args(one.data(), t), 1);
    EXPECT_EQ(0, std::memcmp(one.data(), &all[t * rows], rows * sizeof(float))) << "token " << t;
  }
}

TEST(PackedAmx, MatmulRunsTheAmxTileWhenOnAndBothPathsMatchReference) {
  if (!has_amx()) GTEST_SKIP() << "no AMX-BF16 on this CPU (or not granted by the OS)";
  // 100 tokens: the prefill loop order, 16-token tiles and a 4-token one; 29 rows: a whole
  // group and a partial one. The activations matmul quantizes are Bf16Case's (the same bf16
  // rounding).
  const int64_t rows = 29, cols = 256, nt = 100;
  const Bf16Case c(rows, cols, nt, 21);
  const auto x = testing::random_normal(nt * cols, 22);  // Bf16Case's seed + 1
  ThreadPool pool(2);
  const bool was = amx_enabled();
  for (bool amx : {true, false}) {
    set_amx_enabled(amx);
    ASSERT_EQ(amx_enabled(), amx);
    std::vector<float> out(nt * rows);
    matmul(c.packed.view(), x.data(), nt, out.data(), &pool);
    EXPECT_LT(c.worst(out, 0, nt), 1e-6) << (amx ? "AMX" : "vdpbf16ps");
    if (amx) {  // the tile itself, called directly on the first 16 tokens
      std::vector<float> direct(cpu::kAmxTileTokens * rows);
      cpu::packed_tile_amx_bf16(c.args(direct.data(), 0), cpu::kAmxTileTokens);
      EXPECT_EQ(0, std::memcmp(direct.data(), out.data(), direct.size() * sizeof(float)));
    }
  }
  set_amx_enabled(was);
}

}  // namespace
}  // namespace loom::kernels
