// Conversion between float and every storage dtype (block formats from ggml's public
// headers). Dequantization is bit-exact to the GGUF spec.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "format/dtype.h"

namespace loom::kernels {

// n must be a multiple of the dtype's block size.
void dequantize_row(Dtype t, const void* src, float* dst, int64_t n);
// Writes row_bytes(t, n) bytes. Error for dtypes loom cannot produce.
Status quantize_row(Dtype t, const float* src, void* dst, int64_t n);

}  // namespace loom::kernels
