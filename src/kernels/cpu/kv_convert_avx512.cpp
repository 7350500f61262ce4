// AVX-512 float -> f16 / bf16 conversion of K/V rows as they are written to the cache
// (round to nearest even, as the scalar f32_to_fp16 / f32_to_bf16).
#include <immintrin.h>

#include "kernels/cpu/matmul_kernels.h"

namespace loom::kernels::cpu {

void store_kv_half_avx512(bool bf16, const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(src + i);
    const __m256i h = bf16 ? reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(x))
                           : _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), h);
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 x = _mm512_maskz_loadu_ps(m, src + i);
    const __m256i h = bf16 ? reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(x))
                           : _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_mask_storeu_epi16(dst + i, m, h);
  }
}

}  // namespace loom::kernels::cpu
