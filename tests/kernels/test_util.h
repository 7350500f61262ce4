// Shared helpers for kernel tests: seeded random data and error norms.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "format/tensor.h"
#include "kernels/quant.h"
#include "kernels/ref/ref.h"

namespace loom::kernels::testing {

inline std::vector<float> random_normal(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// ||a - b|| / ||b||
inline double rel_error(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}

// The worst error of got (got[t * rows + r]) against the reference in double, over w's rows and
// nt tokens, as a fraction of the error bound of int8 activations with one scale per `block`
// columns: the sum over blocks of amax |x| / 254 * sum |w| (plus 1e-5 of sum |w x| for the
// float sums). Below 1 where the activations' rounding is a kernel's only error; a wrong scale
// or q is off by O(1) of sum |w x|.
inline double worst_of_int8_bound(const TensorView& w, const std::vector<float>& x, int64_t nt,
                                  const float* got, int64_t block) {
  const int64_t rows = w.rows(), cols = w.cols();
  std::vector<float> wr(cols);
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r) {
    ref::dequantize_row(w.dtype, w.row(r), wr.data(), cols);
    for (int64_t t = 0; t < nt; ++t) {
      const float* xt = &x[t * cols];
      double exact = 0, bound = 0, mag = 0;
      for (int64_t b = 0; b < cols / block; ++b) {
        double amax = 0, wsum = 0;
        for (int64_t k = block * b; k < block * b + block; ++k) {
          exact += double(wr[k]) * xt[k];
          mag += std::abs(double(wr[k]) * xt[k]);
          amax = std::max(amax, std::abs(double(xt[k])));
          wsum += std::abs(double(wr[k]));
        }
        bound += amax / 254 * wsum;
      }
      worst = std::max(worst, std::abs(got[t * rows + r] - exact) / (bound + 1e-5 * mag));
    }
  }
  return worst;
}

// A rows x cols weight matrix of dtype t quantized from seeded normal values (scale 0.5).
// view points into bytes: move it, never copy it.
struct QuantizedMatrix {
  TensorView view;
  std::vector<uint8_t> bytes;
};
// Points m.view at m.bytes as a rows x cols matrix of dtype t.
inline void view_bytes(QuantizedMatrix& m, Dtype t, int64_t rows, int64_t cols) {
  m.view.dtype = t;
  m.view.n_dims = 2;
  m.view.ne = {cols, rows, 1, 1};
  m.view.data = m.bytes.data();
  m.view.nbytes = m.bytes.size();
}
inline QuantizedMatrix quantized_matrix(Dtype t, int64_t rows, int64_t cols, uint32_t seed) {
  QuantizedMatrix m;
  const uint64_t rb = *row_bytes(t, cols);
  m.bytes.resize(rb * rows);
  const auto src = random_normal(rows * cols, seed, 0.5f);
  for (int64_t r = 0; r < rows; ++r)
    EXPECT_TRUE(quantize_row(t, src.data() + r * cols, m.bytes.data() + r * rb, cols).is_ok());
  view_bytes(m, t, rows, cols);
  return m;
}

}  // namespace loom::kernels::testing
