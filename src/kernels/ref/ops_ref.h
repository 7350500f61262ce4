// Scalar ground truth for kernels/ops.h: the same contracts, double accumulation, no tricks.
// Tests compare the fast ops against these on random inputs.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/ops.h"

namespace loom::kernels::ref {

void rms_norm(const float* x, const float* w, float* out, int64_t n, float eps);
void rope(float* x, int64_t n_heads, int64_t head_dim, int32_t pos, const float* inv_freq,
          bool neox);
void softmax(float* x, int64_t n);
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
// kernels/activation.h's row ops, in double.
void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n);
void softcap(float* x, int64_t n, float cap);
void rope_rotate_partial(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot,
                         const float* cs, const float* sn, bool neox);
// No scratch: allocates (reference code, not for the hot path). Tokens [kv_begin, n_kv);
// softcap > 0 caps each score s as softcap * tanh(s / softcap) (kernels/attention.h).
void attention(const float* q, const PagedHead& k, const PagedHead& v, int64_t head_dim,
               int32_t n_kv, float scale, float* out, int32_t kv_begin = 0, float softcap = 0.0f,
               float sink = -INFINITY);

}  // namespace loom::kernels::ref
