// AVX-512 (VNNI) tile for kRows16-packed Q6_K matrices (layout in kernels/packed.h) against the
// activations quantized with one scale per 256 columns (PackedActRow's q256).
//
// A value is d * sc_j * (q - 32) for 16-column sub-block j, q in 0..63 and sc_j an int8 per row.
// With one activation scale d_x per super-block the super-block is one exact integer per row and
// token, S = sum_j sc_j * sum_{i in j} (q_i - 32) x_i, and one float epilogue,
// acc += d * d_x * S, instead of one per 16 columns. Each 8-column half of a sub-block's dot
// fits an int16 (it starts at -32 * sum(x): |sum (q - 32) x| <= 32 * 127 * 8 = 32,512): the two
// halves meet in one int32 lane per row as (hi << 16) | lo, which one vpdpwssd multiplies by the
// row's (sc_j, sc_j) and adds to S.
// Step k's q from the sub-block's vectors s0..s2 (packed.h): 16-bit shifts move bits 0-1 of the
// next byte into bits 6-7, which the & 63 drops.
// Integer parts exact, one float order per token: batch-invariant, and a scalar redo of this
// arithmetic matches it bit for bit (PackedQ6_K test). Up to kPackedPer256TileTokens tokens.
#include <immintrin.h>

#include "kernels/cpu/packed_kernels.h"
#include "kernels/cpu/packed_tile_util.h"
#include "kernels/packed.h"

namespace loom::kernels::cpu {
namespace {

constexpr int kScaleBytes = 32;                   // after 16 fp16 d
constexpr int kQuantBytes = 32 + 16 * kPackRows;  // after the scales

template <int G, int T>
void tile_q6_k(const PackedArgs& a) {
  const int64_t nsb = a.cols / 256;
  const int8_t* xq[T];
  const float* xd[T];
  const int16_t* xsum8[T];
  for (int t = 0; t < T; ++t) {
    const PackedActRow row(a.x + t * a.x_stride, a.cols);
    xq[t] = row.q256;
    xd[t] = row.d256;
    xsum8[t] = row.sum256_8;
  }
  const RecordPrefetch<kPackedQ6KBytes> prefetch(a);
  const __m512i low6 = _mm512_set1_epi8(63), low16 = _mm512_set1_epi32(0xFFFF);
  constexpr int kXorAnd = 0x28;  // vpternlog: (a ^ b) & c
  __m512 acc[T][G];
  for (int t = 0; t < T; ++t)
    for (int g = 0; g < G; ++g) acc[t][g] = _mm512_setzero_ps();
  for (int64_t s = 0; s < nsb; ++s) {
    const uint8_t* rec[G];
    for (int g = 0; g < G; ++g) rec[g] = a.w + (g * nsb + s) * kPackedQ6KBytes;
    // Each 8-column half's dot starts at -32 * sum(x).
    alignas(64) int32_t start[T][32];
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < 2; ++h) {
        const __m512i sums = _mm512_cvtepi16_epi32(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xsum8[t] + 32 * s + 16 * h)));
        _mm512_store_si512(start[t] + 16 * h,
                           _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sums, 5)));
      }
    __m512i sum[T][G];
    for (int t = 0; t < T; ++t)
      for (int g = 0; g < G; ++g) sum[t][g] = _mm512_setzero_si512();
    for (int j = 0; j < 16; ++j) {
      prefetch.template part<G, 16>(rec, j);
      __m512i lo[T][G], hi[T][G];  // the dots of columns 0..7 and 8..15
      for (int t = 0; t < T; ++t) {
        const __m512i lo0 = _mm512_set1_epi32(start[t][2 * j]);
        const __m512i hi0 = _mm512_set1_epi32(start[t][2 * j + 1]);
        for (int g = 0; g < G; ++g) {
          lo[t][g] = lo0;
          hi[t][g] = hi0;
        }
      }
      __m512i prev[G];  // s_{k-1}
      for (int k = 0; k < 4; ++k) {
        __m512i w[G];
        for (int g = 0; g < G; ++g) {
          const uint8_t* sv = rec[g] + kQuantBytes + 192 * j + 64 * k;
          if (k == 0) {
            prev[g] = _mm512_loadu_si512(sv);
            w[g] = _mm512_and_si512(prev[g], low6);
          } else if (k < 3) {
            const __m512i cur = _mm512_loadu_si512(sv);
            w[g] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(prev[g], 2), cur, low6, kXorAnd);
            prev[g] = cur;
          } else {
            w[g] = _mm512_and_si512(_mm512_srli_epi16(prev[g], 2), low6);
          }
        }
        for (int t = 0; t < T; ++t) {
          const __m512i xv = bcast4(xq[t] + 256 * s + 16 * j + 4 * k);
          for (int g = 0; g < G; ++g) {
            if (k < 2)
              lo[t][g] = _mm512_dpbusd_epi32(lo[t][g], w[g], xv);
            else
              hi[t][g] = _mm512_dpbusd_epi32(hi[t][g], w[g], xv);
          }
        }
      }
      __m512i sc[G];  // (sc_j, sc_j) as an int16 pair per row
      for (int g = 0; g < G; ++g) {
        const __m512i v = _mm512_cvtepi8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(rec[g] + kScaleBytes + 16 * j)));
        sc[g] = _mm512_or_si512(_mm512_and_si512(v, low16), _mm512_slli_epi32(v, 16));
      }
      for (int t = 0; t < T; ++t)
        for (int g = 0; g < G; ++g) {
          const __m512i halves =
              _mm512_mask_blend_epi16(0x55555555u, _mm512_slli_epi32(hi[t][g], 16), lo[t][g]);
          sum[t][g] = _mm512_dpwssd_epi32(sum[t][g], halves, sc[g]);
        }
    }
    for (int g = 0; g < G; ++g) {
      const __m512 d =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec[g])));
      for (int t = 0; t < T; ++t)
        acc[t][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[t][g]),
                                    _mm512_mul_ps(d, _mm512_set1_ps(xd[t][s])), acc[t][g]);
    }
  }
  for (int t = 0; t < T; ++t) store_rows<G>(a, t, acc[t]);
}

template <int G>
void by_tokens(const PackedArgs& a, int n_tok) {
  static_assert(kPackedPer256TileTokens == 3, "cases below");
  switch (n_tok) {
    case 1:
      return tile_q6_k<G, 1>(a);
    case 2:
      return tile_q6_k<G, 2>(a);
    default:
      return tile_q6_k<G, 3>(a);
  }
}

}  // namespace

void packed_tile_q6_k(const PackedArgs& a, int n_tok) {
  static_assert(kPackedTileGroups == 2, "one or two groups below");
  if (a.n_rows > 16)
    by_tokens<2>(a, n_tok);
  else
    by_tokens<1>(a, n_tok);
}

}  // namespace loom::kernels::cpu
