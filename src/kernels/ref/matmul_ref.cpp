// Reference matmul: dequantize each weight row, accumulate products in double.
#include <vector>

#include "base/status.h"
#include "kernels/ref/ref.h"

namespace loom::kernels::ref {

void matmul(const TensorView& w, const float* x, int64_t n_tokens, float* out) {
  const int64_t rows = w.rows(), cols = w.cols();
  std::vector<float> wr(cols);
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(w.dtype, w.row(r), wr.data(), cols);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* xt = x + t * cols;
      double acc = 0;
      for (int64_t k = 0; k < cols; ++k) acc += static_cast<double>(wr[k]) * xt[k];
      out[t * rows + r] = static_cast<float>(acc);
    }
  }
}

}  // namespace loom::kernels::ref
