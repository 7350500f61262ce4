// AVX-512 versions of element-wise ops of kernels/ops.h.
#include <immintrin.h>

#include "kernels/cpu/matmul_kernels.h"
#include "kernels/cpu/vec_math_avx512.h"

namespace loom::kernels::cpu {

void silu_mul_avx512(const float* gate, const float* up, float* out, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m =
        n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 u = _mm512_maskz_loadu_ps(m, up + i);
    const __m512 silu =
        _mm512_div_ps(g, _mm512_add_ps(one, exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), g))));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(silu, u));
  }
}

void gelu_tanh_mul_avx512(const float* gate, const float* up, float* out, int64_t n) {
  const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
  const __m512 k0 = _mm512_set1_ps(0.7978845608028654f), k1 = _mm512_set1_ps(0.044715f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m =
        n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 x = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 u = _mm512_maskz_loadu_ps(m, up + i);
    const __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
    const __m512 t = tanh_ps(_mm512_mul_ps(k0, _mm512_fmadd_ps(k1, x3, x)));
    const __m512 g = _mm512_mul_ps(_mm512_mul_ps(half, x), _mm512_add_ps(one, t));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(g, u));
  }
}

void softcap_avx512(float* x, int64_t n, float cap) {
  const __m512 c = _mm512_set1_ps(cap), inv = _mm512_set1_ps(1.0f / cap);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m =
        n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(c, tanh_ps(_mm512_mul_ps(v, inv))));
  }
}

// A product as its own rounded value: the barrier keeps the compiler from fusing it into the
// next add (-ffp-contract=fast lowers _mm512_mul_ps + _mm512_sub_ps to one FMA), so RoPE rounds
// as the scalar loop does.
inline __m512 product(__m512 a, __m512 b) {
  __m512 p = _mm512_mul_ps(a, b);
  asm("" : "+v"(p));
  return p;
}

void rope_rotate_avx512(float* x, int64_t n_heads, int64_t head_dim, const float* cs,
                        const float* sn, bool neox) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    if (neox) {  // pairs (i, i + half)
      for (int64_t i = 0; i < half; i += 16) {
        const __m512 x0 = _mm512_loadu_ps(v + i), x1 = _mm512_loadu_ps(v + i + half);
        const __m512 c = _mm512_loadu_ps(cs + i), s = _mm512_loadu_ps(sn + i);
        _mm512_storeu_ps(v + i, _mm512_sub_ps(product(x0, c), product(x1, s)));
        _mm512_storeu_ps(v + i + half, _mm512_add_ps(product(x0, s), product(x1, c)));
      }
      continue;
    }
    // Pairs (2i, 2i + 1): 8 pairs a vector, each angle's cos and sin in both lanes of its pair;
    // even lanes x0 c - x1 s, odd lanes x1 c + x0 s (the pair swapped times s, then + or -).
    const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    for (int64_t i = 0; i < half; i += 8) {
      const __m512 xv = _mm512_loadu_ps(v + 2 * i);
      const __m512 c = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_loadu_ps(cs + i)));
      const __m512 s = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_loadu_ps(sn + i)));
      const __m512 a = product(xv, c);
      const __m512 b = product(_mm512_permute_ps(xv, 0xB1), s);  // (x1, x0) * s
      _mm512_storeu_ps(v + 2 * i, _mm512_mask_sub_ps(_mm512_add_ps(a, b), 0x5555, a, b));
    }
  }
}

}  // namespace loom::kernels::cpu
