// Scalar ground truth for quantization and matmul. Dequantization reproduces ggml's reference
// float arithmetic operation for operation (bit-exact); quantizers follow ggml's reference
// (non-imatrix) algorithms. Everything fast is tested against these.
#pragma once

#include <cstdint>

#include "format/dtype.h"
#include "format/tensor.h"

namespace loom::kernels::ref {

// True for dtypes with a reference dequantizer (F32, F16, BF16, Q4_0 ... Q8_K, MXFP4).
bool can_dequantize(Dtype t);
// True for dtypes loom can quantize to (everything dequantizable except Q8_1).
bool can_quantize(Dtype t);

// n must be a multiple of the block size; t must satisfy can_dequantize / can_quantize.
void dequantize_row(Dtype t, const void* src, float* dst, int64_t n);
void quantize_row(Dtype t, const float* src, void* dst, int64_t n);

// out[t * rows + r] = sum_k W[r][k] * x[t * cols + k], weights dequantized with
// dequantize_row, products accumulated in double. Slow; for tests.
void matmul(const TensorView& w, const float* x, int64_t n_tokens, float* out);

// Helpers shared by the quantizers (ggml's rounding: round half away... via the 1.5*2^23 trick,
// i.e. round to nearest even; valid for |v| < 2^22).
int nearest_int(float v);

}  // namespace loom::kernels::ref
