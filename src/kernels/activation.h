// Row operations the layer steps of newer families need beside ops.h's: the GELU (tanh
// approximation) gated activation of Gemma, and RoPE over only the first n_rot dimensions of
// each head (partial rotary: Phi-3/4).
#pragma once

#include <cstdint>

namespace loom::kernels {

// out[i] = gelu_tanh(gate[i]) * up[i], gelu_tanh(x) = x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³)))
// (PyTorch's gelu(approximate="tanh")). out may alias gate or up.
void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n);

// rope_rotate (ops.h) applied to dimensions [0, n_rot) of each of n_heads heads of head_dim
// floats; the rest pass through. cs/sn hold n_rot / 2 angles; neox pairs (i, i + n_rot / 2).
void rope_rotate_partial(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot,
                         const float* cs, const float* sn, bool neox);

// x[i] = cap · tanh(x[i] / cap) (logit soft-capping).
void softcap(float* x, int64_t n, float cap);

}  // namespace loom::kernels
