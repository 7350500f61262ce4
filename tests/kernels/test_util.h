// Shared helpers for kernel tests: seeded random data and error norms.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "format/tensor.h"
#include "kernels/quant.h"

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
