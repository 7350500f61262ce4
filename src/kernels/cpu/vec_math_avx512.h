// Vector math for the AVX-512 kernels (include only from *_avx512.cpp files).
#pragma once

#include <immintrin.h>

namespace loom::kernels::cpu {

// exp(x): x = n ln2 + r with |r| <= ln2/2, a degree-6 Taylor polynomial for e^r (relative
// error < 2e-7 there), scaled by 2^n. Below -87 it returns e^-87 (~1.6e-38, no denormals);
// above ~88.7, +inf.
inline __m512 exp_ps(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);  // ln2, high part
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);      // ln2, low part
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// tanh(x): the odd 13/6-degree rational minimax fit Eigen uses (a few ulp), on x clamped to
// +-7.9053 where it reaches +-1; below 4e-4 in magnitude, x itself (x^3 / 3 is under half an
// ulp there). Not built from exp_ps: 1 - 2 / (e^2x + 1) loses the relative precision of small
// x, and attention soft-capping (kernels/attention.h) multiplies it back up by the cap.
inline __m512 tanh_ps(__m512 x) {
  const __m512 clamp = _mm512_set1_ps(7.90531110763549805f);
  const __m512 xc =
      _mm512_min_ps(_mm512_max_ps(x, _mm512_sub_ps(_mm512_setzero_ps(), clamp)), clamp);
  const __m512 x2 = _mm512_mul_ps(xc, xc);
  __m512 p = _mm512_set1_ps(-2.76076847742355e-16f);
  p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(2.00018790482477e-13f));
  p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(-8.60467152213735e-11f));
  p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(5.12229709037114e-08f));
  p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(1.48572235717979e-05f));
  p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(6.37261928875436e-04f));
  p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(4.89352455891786e-03f));
  p = _mm512_mul_ps(p, xc);
  __m512 q = _mm512_set1_ps(1.19825839466702e-06f);
  q = _mm512_fmadd_ps(q, x2, _mm512_set1_ps(1.18534705686654e-04f));
  q = _mm512_fmadd_ps(q, x2, _mm512_set1_ps(2.26843463243900e-03f));
  q = _mm512_fmadd_ps(q, x2, _mm512_set1_ps(4.89352518554385e-03f));
  const __mmask16 tiny = _mm512_cmp_ps_mask(_mm512_abs_ps(x), _mm512_set1_ps(0.0004f), _CMP_LT_OQ);
  return _mm512_mask_blend_ps(tiny, _mm512_div_ps(p, q), x);
}

}  // namespace loom::kernels::cpu
