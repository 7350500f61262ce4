// AVX-512 quantization of activation rows to kQ8_32 / kQ8_32U: the same arithmetic as the
// scalar quantize_act_row (amax / 127 scale, its reciprocal, round-to-nearest-even, clamp to
// +-127), so both produce identical bytes; only the speed differs.
#include <immintrin.h>

#include "kernels/cpu/matmul_kernels.h"
#include "kernels/cpu/packed_kernels.h"

namespace loom::kernels::cpu {
namespace {

// The packed row's second quantization, one scale per 256 (packed_kernels.h), in llama.cpp's
// Q8_K arithmetic as ref::quantize_row(kQ8_K) has it (the row kernels' activations): the value
// of largest magnitude `max` (the first one, with its sign), iscale = -127 / max, q = iscale * x
// rounded to nearest even, d = 1 / iscale; and the int16 sums of each 32 and each 16 q. So the
// packed K-quant tiles multiply the same integers as the row kernels and llama.cpp (with
// d = amax / 127 and x * (1 / d) instead, an activation rounded the other way now and then
// moved a tiny model's logits by 1%).
void quantize_per_256(const float* x, int64_t cols, const PackedActRowOut& row) {
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  for (int64_t b = 0; b < cols / 256; ++b) {
    const float* xb = x + 256 * b;
    __m512 m = _mm512_setzero_ps();
    for (int i = 0; i < 256; i += 16)
      m = _mm512_max_ps(m, _mm512_and_ps(_mm512_loadu_ps(xb + i), abs_mask));
    const float amax = _mm512_reduce_max_ps(m);
    float max = 0.0f;  // the first value whose magnitude is amax
    for (int i = 0; amax > 0.0f && i < 256; i += 16) {
      const __mmask16 at = _mm512_cmp_ps_mask(_mm512_and_ps(_mm512_loadu_ps(xb + i), abs_mask),
                                              _mm512_set1_ps(amax), _CMP_EQ_OQ);
      if (at) {
        max = xb[i + __builtin_ctz(at)];
        break;
      }
    }
    const float iscale = amax > 0.0f ? -127.0f / max : 0.0f;
    const __m512 id = _mm512_set1_ps(iscale);
    row.d256[b] = amax > 0.0f ? 1 / iscale : 0.0f;
    for (int i = 0; i < 256; i += 32) {
      const __m512i q0 = _mm512_min_epi32(
          hi, _mm512_max_epi32(lo, _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + i), id))));
      const __m512i q1 = _mm512_min_epi32(
          hi, _mm512_max_epi32(
                  lo, _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + i + 16), id))));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(row.q256 + 256 * b + i),
                       _mm512_cvtsepi32_epi8(q0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(row.q256 + 256 * b + i + 16),
                       _mm512_cvtsepi32_epi8(q1));
      const auto half0 = static_cast<int16_t>(_mm512_reduce_add_epi32(q0));
      const auto half1 = static_cast<int16_t>(_mm512_reduce_add_epi32(q1));
      row.sum256_16[16 * b + i / 16] = half0;
      row.sum256_16[16 * b + i / 16 + 1] = half1;
      row.sum256_32[8 * b + i / 32] = static_cast<int16_t>(half0 + half1);
    }
  }
}

}  // namespace

void quantize_act_row_q8_32_avx512(const float* x, int64_t cols, uint8_t* dst, bool as_unsigned,
                                   bool int_sums, bool per_256) {
  auto* qs = reinterpret_cast<int8_t*>(dst);
  auto* d = reinterpret_cast<float*>(dst + cols);
  float* s = d + cols / 32;
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  const __m128i flip = _mm_set1_epi8(as_unsigned ? static_cast<char>(0x80) : 0);
  for (int64_t b = 0; b < cols / 32; ++b) {
    const __m512 x0 = _mm512_loadu_ps(x + 32 * b), x1 = _mm512_loadu_ps(x + 32 * b + 16);
    const float amax = _mm512_reduce_max_ps(
        _mm512_max_ps(_mm512_and_ps(x0, abs_mask), _mm512_and_ps(x1, abs_mask)));
    const float db = amax / 127;
    const __m512 id = _mm512_set1_ps(db ? 1.0f / db : 0.0f);
    const __m512i q0 =
        _mm512_min_epi32(hi, _mm512_max_epi32(lo, _mm512_cvtps_epi32(_mm512_mul_ps(x0, id))));
    const __m512i q1 =
        _mm512_min_epi32(hi, _mm512_max_epi32(lo, _mm512_cvtps_epi32(_mm512_mul_ps(x1, id))));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 32 * b),
                     _mm_xor_si128(_mm512_cvtsepi32_epi8(q0), flip));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 32 * b + 16),
                     _mm_xor_si128(_mm512_cvtsepi32_epi8(q1), flip));
    d[b] = db;
    const int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    if (int_sums) {  // the packed kernels' row (packed_kernels.h)
      const PackedActRowOut row(dst, cols);
      row.start_q4_0[b] = -8 * sum;
      row.start_q8_0[b] = -128 * sum;
      row.start_mxfp4[b] = -12 * sum;
    } else
      s[b] = db * static_cast<float>(sum);
  }
  if (int_sums && per_256 && cols % 256 == 0) quantize_per_256(x, cols, PackedActRowOut(dst, cols));
}

}  // namespace loom::kernels::cpu
