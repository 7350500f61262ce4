// AVX-512 quantization of activation rows to kQ8_32 / kQ8_32U: the same arithmetic as the
// scalar quantize_act_row (amax / 127 scale, its reciprocal, round-to-nearest-even, clamp to
// +-127), so both produce identical bytes; only the speed differs.
#include <immintrin.h>

#include "kernels/cpu/matmul_kernels.h"
#include "kernels/cpu/packed_kernels.h"

namespace loom::kernels::cpu {
namespace {

// The packed row's second quantization, one scale per 256 (packed_kernels.h): the arithmetic of
// the per-32 loop below over 256 values, and the int16 sums of each 32, 16 and 8 q.
void quantize_per_256(const float* x, int64_t cols, const PackedActRowOut& row) {
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  for (int64_t b = 0; b < cols / 256; ++b) {
    const float* xb = x + 256 * b;
    __m512 m = _mm512_setzero_ps();
    for (int i = 0; i < 256; i += 16)
      m = _mm512_max_ps(m, _mm512_and_ps(_mm512_loadu_ps(xb + i), abs_mask));
    const float db = _mm512_reduce_max_ps(m) / 127;
    const __m512 id = _mm512_set1_ps(db ? 1.0f / db : 0.0f);
    row.d256[b] = db;
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
    }
    // Sums of each 8 q: vpsadbw of q + 128 (as unsigned bytes) against zero, less 8 * 128.
    for (int i = 0; i < 256; i += 64) {
      const __m512i u = _mm512_xor_si512(_mm512_loadu_si512(row.q256 + 256 * b + i),
                                         _mm512_set1_epi8(static_cast<char>(0x80)));
      const __m512i sums =
          _mm512_sub_epi64(_mm512_sad_epu8(u, _mm512_setzero_si512()), _mm512_set1_epi64(1024));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(row.sum256_8 + 32 * b + i / 8),
                       _mm512_cvtepi64_epi16(sums));
    }
    for (int j = 0; j < 16; ++j)
      row.sum256_16[16 * b + j] =
          static_cast<int16_t>(row.sum256_8[32 * b + 2 * j] + row.sum256_8[32 * b + 2 * j + 1]);
    for (int j = 0; j < 8; ++j)
      row.sum256_32[8 * b + j] =
          static_cast<int16_t>(row.sum256_16[16 * b + 2 * j] + row.sum256_16[16 * b + 2 * j + 1]);
  }
}

}  // namespace

void quantize_act_row_q8_32_avx512(const float* x, int64_t cols, uint8_t* dst, bool as_unsigned,
                                   bool packed_row, bool per_256) {
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
    if (packed_row) {  // PackedActRow (packed_kernels.h)
      const PackedActRowOut row(dst, cols);
      row.start_q4_0[b] = -8 * sum;
      row.start_q8_0[b] = -128 * sum;
      row.start_mxfp4[b] = -12 * sum;
    } else
      s[b] = db * static_cast<float>(sum);
  }
  if (packed_row && per_256 && cols % 256 == 0)
    quantize_per_256(x, cols, PackedActRowOut(dst, cols));
}

}  // namespace loom::kernels::cpu
