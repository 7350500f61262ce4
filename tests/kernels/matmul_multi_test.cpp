// kernels::matmul_multi gives each matrix exactly what kernels::matmul gives it alone (shared
// activation quantization, one pool hand-off, mixed activation formats), a RowFill gives what
// filling the rows first gives, and the AVX-512 activation quantizer writes the same bytes as
// the scalar one.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu/act_quant.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/matmul_kernels.h"
#include "kernels/matmul.h"
#include "kernels/packed.h"
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

// The rows a fill computes inside the matmul's activation pass: the same outputs, bit for bit,
// as filling every row first and then multiplying; each row filled once and left in x. Packed
// and row layouts, every activation format, a mix of formats (rows filled once, then each
// matrix alone), and token counts below and above the parallel pass's threshold.
TEST(MatmulMulti, RowFillEqualsFillingTheRowsFirst) {
  ThreadPool pool(2);
  const int64_t cols = 512;
  struct Set {
    std::vector<Dtype> dtypes;
    bool packed;
  };
  const std::vector<Set> sets = {
      {{Dtype::kQ4_0, Dtype::kQ4_0}, true},
      {{Dtype::kQ8_0}, true},
      {{Dtype::kF16, Dtype::kF16}, true},
      {{Dtype::kBF16}, true},
      {{Dtype::kQ4_K, Dtype::kQ6_K}, true},
      {{Dtype::kQ8_0, Dtype::kQ4_K}, false},
      {{Dtype::kF16}, false},
      {{Dtype::kQ8_0, Dtype::kF16, Dtype::kQ4_K}, false},
      {{Dtype::kQ4_0, Dtype::kF16}, true},
  };
  for (Isa isa : available_isas()) {
    set_active_isa(isa);
    for (const Set& set : sets) {
      std::vector<Matrix> ms;
      std::vector<PackedMatrix> packed;
      for (size_t i = 0; i < set.dtypes.size(); ++i)
        ms.push_back(make_matrix(set.dtypes[i], 48 + 16 * static_cast<int64_t>(i), cols, 60 + i));
      if (set.packed) {
        if (active_isa() != Isa::kAvx512) continue;  // packed layouts are AVX-512 only
        for (const Matrix& m : ms) packed.push_back(PackedMatrix::pack_rows16(m.view));
      }
      auto view = [&](size_t i) -> const TensorView& {
        return set.packed ? packed[i].view() : ms[i].view;
      };
      for (int64_t n_tokens : {1, 5, 16, 40}) {
        const auto src = testing::random_normal(n_tokens * cols, 9);
        // The row a fill writes: a function of the token and its source row.
        auto row_of = [&](int64_t t, float* row) {
          for (int64_t j = 0; j < cols; ++j) row[j] = 0.5f * src[t * cols + j] + 0.01f * t;
        };
        std::vector<float> filled(n_tokens * cols);
        for (int64_t t = 0; t < n_tokens; ++t) row_of(t, &filled[t * cols]);
        std::vector<std::atomic<int>> calls(n_tokens);
        const auto fill = [&](int64_t t, float* row) {
          calls[t]++;
          row_of(t, row);
        };
        std::vector<float> x(n_tokens * cols, -7.0f);
        std::vector<std::vector<float>> got, want;
        std::vector<MatmulTarget> targets;
        for (size_t i = 0; i < ms.size(); ++i) {
          got.emplace_back(n_tokens * view(i).rows(), -1.0f);
          want.emplace_back(n_tokens * view(i).rows(), -2.0f);
        }
        for (size_t i = 0; i < ms.size(); ++i) targets.push_back({&view(i), got[i].data()});
        if (targets.size() == 1)
          matmul(view(0), x.data(), n_tokens, got[0].data(), &pool, fill);
        else
          matmul_multi(targets.data(), targets.size(), x.data(), n_tokens, &pool, fill);
        const std::string what =
            std::string(isa_name(isa)) + " " + std::string(dtype_name(set.dtypes[0])) +
            (set.packed ? " packed" : " rows") + ", tokens " + std::to_string(n_tokens);
        EXPECT_EQ(0, std::memcmp(x.data(), filled.data(), x.size() * sizeof(float))) << what;
        for (int64_t t = 0; t < n_tokens; ++t) EXPECT_EQ(calls[t].load(), 1) << what;
        for (size_t i = 0; i < ms.size(); ++i) {
          matmul(view(i), filled.data(), n_tokens, want[i].data(), &pool);
          EXPECT_EQ(0, std::memcmp(got[i].data(), want[i].data(), got[i].size() * sizeof(float)))
              << what << " matrix " << i;
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
