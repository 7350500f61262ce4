// TensorView: a typed, shaped, non-owning view of tensor data (mapped file or owned buffer).
// Shapes follow ggml order: ne[0] is the contiguous (fastest) dimension. A weight matrix
// W with `rows` outputs and `cols` inputs has ne = {cols, rows}: row r is `cols` elements.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "format/dtype.h"

namespace loom {

// How a matrix's bytes are arranged. kRows: ggml order, row after row, as in the file.
// kRows16: repacked at load time for the matmul kernels (kernels/packed.h): rows in groups of
// 16 with each 32-block's scales and quants interleaved across the group; row()/row_stride()
// do not apply.
enum class TensorLayout : uint8_t { kRows, kRows16 };

struct TensorView {
  Dtype dtype = Dtype::kF32;
  TensorLayout layout = TensorLayout::kRows;
  int n_dims = 0;
  std::array<int64_t, 4> ne{1, 1, 1, 1};
  const void* data = nullptr;
  uint64_t nbytes = 0;

  int64_t numel() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t cols() const { return ne[0]; }
  int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  uint64_t row_stride() const { return nbytes / static_cast<uint64_t>(rows()); }
  const uint8_t* row(int64_t r) const { return static_cast<const uint8_t*>(data) + r * row_stride(); }
};

std::string shape_string(const TensorView& t);  // "[4096, 32000]"

}  // namespace loom
