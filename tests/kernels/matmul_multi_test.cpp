// kernels::matmul_multi gives each matrix exactly what kernels::matmul gives it alone (shared
// activation quantization, one pool hand-off, mixed activation formats), and the AVX-512
// activation quantizer writes the same bytes as the scalar one.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu/act_quant.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/matmul_kernels.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "test_util.h"

namespace loom::kernels {
namespace {

using Matrix = testing::QuantizedMatrix;

Matrix make_matrix(Dtype t, int64_t rows, int64_t cols, uint32_t seed) {
  return testing::quantized_matrix(t, rows, cols, seed);
}

TEST(MatmulMulti, EachOutputEqualsItsOwnMatmul) {
  ThreadPool pool(2);
  const int64_t cols = 512;
  // Same dtype (shared quantization), and a mix whose kernels want different activations.
  const std::vector<std::vector<Dtype>> sets = {
      {Dtype::kQ8_0, Dtype::kQ8_0, Dtype::kQ8_0},
      {Dtype::kQ4_K, Dtype::kQ6_K},
      {Dtype::kQ8_0, Dtype::kF16, Dtype::kQ4_K},
  };
  for (Isa isa : available_isas()) {
    set_active_isa(isa);
    for (const auto& dtypes : sets) {
      for (int64_t n_tokens : {1, 3, 8, 21}) {
        std::vector<Matrix> ms;
        std::vector<std::vector<float>> got, want;
        std::vector<MatmulTarget> targets;
        for (size_t i = 0; i < dtypes.size(); ++i) {
          const int64_t rows =
              64 + 37 * static_cast<int64_t>(i);  // odd sizes, different per matrix
          ms.push_back(make_matrix(dtypes[i], rows, cols, 40 + i));
          got.emplace_back(n_tokens * rows, -1.0f);
          want.emplace_back(n_tokens * rows, -2.0f);
        }
        for (size_t i = 0; i < ms.size(); ++i) targets.push_back({&ms[i].view, got[i].data()});
        const auto x = testing::random_normal(n_tokens * cols, 7);
        matmul_multi(targets.data(), targets.size(), x.data(), n_tokens, &pool);
        for (size_t i = 0; i < ms.size(); ++i) {
          matmul(ms[i].view, x.data(), n_tokens, want[i].data(), &pool);
          EXPECT_EQ(0, std::memcmp(got[i].data(), want[i].data(), got[i].size() * sizeof(float)))
              << isa_name(isa) << " matrix " << i << " (" << dtype_name(dtypes[i]) << ") tokens "
              << n_tokens;
        }
      }
    }
  }
  set_active_isa(best_isa());
}

TEST(ActQuantAvx512, BytesEqualTheScalarQuantizer) {
  if (best_isa() != Isa::kAvx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  const int64_t cols = 1024;
  auto x = testing::random_normal(cols, 3, 2.0f);
  for (int j = 0; j < 32; ++j) x[j] = 0.0f;  // an all-zero block (scale 0)
  x[40] = 1e-30f;                            // a block of one tiny value
  for (bool as_unsigned : {false, true}) {
    const auto f = as_unsigned ? cpu::ActFormat::kQ8_32U : cpu::ActFormat::kQ8_32;
    std::vector<uint8_t> a(cpu::act_row_bytes(f, cols)), b(a.size());
    cpu::quantize_act_row(f, x.data(), cols, a.data());
    cpu::quantize_act_row_q8_32_avx512(x.data(), cols, b.data(), as_unsigned);
    const size_t used = cols + 2 * (cols / 32) * sizeof(float);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), used)) << "unsigned=" << as_unsigned;
  }
}

}  // namespace
}  // namespace loom::kernels
