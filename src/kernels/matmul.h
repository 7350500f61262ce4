// Matrix multiplication of a weight matrix (any supported dtype, kept in its storage format)
// by float activations. The hot loop of every forward pass.
#pragma once

#include <cstdint>

#include "base/function_ref.h"
#include "base/thread_pool.h"
#include "format/tensor.h"
#include "kernels/cpu/isa.h"

namespace loom::kernels {

// out[t * rows + r] = sum_k W[r][k] * x[t * cols + k]   for t < n_tokens, r < w.rows()
// W is w (ne = {cols, rows}); x is [n_tokens][cols] floats; out is [n_tokens][rows].
//
// Batch invariance: each output element is computed with a fixed reduction order that does
// not depend on n_tokens, the thread count or the row's position in the batch, so a token's
// result is bit-identical whether it is multiplied alone or inside a large batch.
// pool may be nullptr (runs on the calling thread). w.dtype must satisfy matmul_supported and
// w.cols() must be a multiple of its block size.
void matmul(const TensorView& w, const float* x, int64_t n_tokens, float* out, ThreadPool* pool);

// Several matrices applied to the same activations (q/k/v, gate/up): the activations are
// quantized once and the row slices of all of them go to the pool in one hand-off. Each
// output is exactly what matmul(*w, x, n_tokens, out) computes. n <= 8; all w share cols.
struct MatmulTarget {
  const TensorView* w;
  float* out;
};
void matmul_multi(const MatmulTarget* targets, int n, const float* x, int64_t n_tokens,
                  ThreadPool* pool);

// The activation rows computed by the matmul itself: fill(t, row) writes token t's cols floats
// to row = x + t * cols. The matmul calls it once per token in the parallel pass over the tokens
// where it quantizes the activations, right before quantizing that row: the row work that
// produces a matmul's input (residual add and norm, SwiGLU) then costs no hand-off of its own and
// the row is still in the core's cache when it is quantized. Results are those of running fill
// over every row first and then the matmul on x. fill is referenced, not copied.
using RowFill = FunctionRef<void(int64_t t, float* row)>;
void matmul(const TensorView& w, float* x, int64_t n_tokens, float* out, ThreadPool* pool,
            const RowFill& fill);
void matmul_multi(const MatmulTarget* targets, int n, float* x, int64_t n_tokens, ThreadPool* pool,
                  const RowFill& fill);

// Weight dtypes matmul accepts: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K ... Q6_K.
bool matmul_supported(Dtype w);

}  // namespace loom::kernels
