// Scalar loops, and AVX-512 ones where the CPU has it (GELU runs over n_ff values per token
// and layer, the logit soft-cap over the whole vocabulary: scalar tanh there costs a Gemma
// model a tenth of its decode time).
#include "kernels/activation.h"

#include <cmath>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/matmul_kernels.h"

namespace loom::kernels {

void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n) {
  if (active_isa() == Isa::kAvx512) {
    cpu::gelu_tanh_mul_avx512(gate, up, out, n);
    return;
  }
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    const float g = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
    out[i] = g * up[i];
  }
}

void rope_rotate_partial(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot,
                         const float* cs, const float* sn, bool neox) {
  const int64_t half = n_rot / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const int64_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * cs[i] - x1 * sn[i];
      v[b] = x0 * sn[i] + x1 * cs[i];
    }
  }
}

void softcap(float* x, int64_t n, float cap) {
  if (active_isa() == Isa::kAvx512) {
    cpu::softcap_avx512(x, n, cap);
    return;
  }
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] * inv);
}

}  // namespace loom::kernels
