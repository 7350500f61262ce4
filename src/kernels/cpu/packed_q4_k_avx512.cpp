// AVX-512 (VNNI) tile for kRows16-packed Q4_K matrices (layout in kernels/packed.h) against the
// activations quantized with one scale per 256 columns (PackedActRow's q256 / d256 / sum256_32).
//
// A Q4_K value is d * sc_j * q - dmin * m_j for 32-column sub-block j, with q in 0..15 and the
// 6-bit sc_j, m_j per row. With one activation scale d_x per super-block the whole super-block
// is two exact integers per row and token,
//   S = sum_j sc_j * sum_{i in j} q_i x_i,   M = sum_j m_j * sum_{i in j} x_i,
// and one float epilogue, acc += d_x * (d * S - dmin * M), instead of one per 32 columns (three
// float ops per row group, token and sub-block, which shared the vpdpbusd ports). From L1 (one
// thread, 1,024 columns, ns per super-block of 32 rows against the per-32 tile): one token 80.7
// -> 70.3; a token of a full tile 51.3 (six tokens) -> 46.0 (three).
// Each 16-column half of a sub-block's dot fits an int16 (|sum q x| <= 15 * 127 * 16 = 30,480):
// the two halves meet in one int32 lane per row as (hi << 16) | lo, which one vpdpwssd
// multiplies by the row's (sc_j, sc_j) and adds to S. M is one vpdpwssd per pair of sub-blocks,
// (m_2p, m_2p+1) against the token's two int16 sums of 32.
// Integer parts exact, one float order per token: a token's result does not depend on the tile
// it is computed in (batch invariance), and a scalar redo of this arithmetic matches it bit for
// bit (PackedQ4_K test).
// Up to kPackedPer256TileTokens tokens: four would hold 5 x 4 x 2 accumulators, more than the 32
// registers (a prototype's 4- to 6-token tiles spilled and ran slower than the per-32 tile).
#include <immintrin.h>

#include "kernels/cpu/packed_kernels.h"
#include "kernels/cpu/packed_tile_util.h"
#include "kernels/packed.h"

namespace loom::kernels::cpu {
namespace {

constexpr int kScaleBytes = 64;                // after 16 fp16 d and 16 fp16 dmin
constexpr int kMinBytes = 64 + 8 * kPackRows;  // after the scales
constexpr int kQuantBytes = 64 + 16 * kPackRows;

// 16 bytes (one per row) as int32 lanes holding (b, b) as an int16 pair.
inline __m512i byte_pairs(const uint8_t* p) {
  const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm512_or_si512(v, _mm512_slli_epi32(v, 16));
}

// Two rows of 16 bytes as int32 lanes holding (a, b) as an int16 pair.
inline __m512i byte_pairs(const uint8_t* a, const uint8_t* b) {
  const __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a)));
  const __m512i hi = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
  return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
}

template <int G, int T>
void tile_q4_k(const PackedArgs& a) {
  constexpr int kRec = kPackedQ4KBytes;
  const int64_t nsb = a.cols / 256;
  const Per256Rows<T> x(a);
  const RecordPrefetch<kRec> prefetch(a);
  const __m512i nib = _mm512_set1_epi8(0x0F);
  __m512 acc[T][G];
  for (int t = 0; t < T; ++t)
    for (int g = 0; g < G; ++g) acc[t][g] = _mm512_setzero_ps();
  for (int64_t s = 0; s < nsb; ++s) {
    const uint8_t* rec[G];
    for (int g = 0; g < G; ++g) rec[g] = a.w + (g * nsb + s) * kRec;
    __m512i sum[T][G];
    for (int t = 0; t < T; ++t)
      for (int g = 0; g < G; ++g) sum[t][g] = _mm512_setzero_si512();
    for (int j = 0; j < 8; ++j) {
      prefetch.template part<G, 8>(rec, j);
      const int8_t* x_j[T];
      for (int t = 0; t < T; ++t) x_j[t] = x.q[t] + 256 * s + 32 * j;
      __m512i lo[T][G], hi[T][G];  // the dots of columns 0..15 and 16..31
      for (int t = 0; t < T; ++t)
        for (int g = 0; g < G; ++g) lo[t][g] = hi[t][g] = _mm512_setzero_si512();
      for (int k = 0; k < 8; ++k) {
        __m512i w[G];
        for (int g = 0; g < G; ++g) {
          const __m512i v = _mm512_loadu_si512(rec[g] + kQuantBytes + 512 * (j / 2) + 64 * k);
          w[g] = _mm512_and_si512(j % 2 ? _mm512_srli_epi16(v, 4) : v, nib);
        }
        for (int t = 0; t < T; ++t) {
          const __m512i xv = bcast4(x_j[t] + 4 * k);
          for (int g = 0; g < G; ++g) {
            if (k < 4)
              lo[t][g] = _mm512_dpbusd_epi32(lo[t][g], w[g], xv);
            else
              hi[t][g] = _mm512_dpbusd_epi32(hi[t][g], w[g], xv);
          }
        }
      }
      __m512i sc[G];
      for (int g = 0; g < G; ++g) sc[g] = byte_pairs(rec[g] + kScaleBytes + 16 * j);
      for (int t = 0; t < T; ++t)
        for (int g = 0; g < G; ++g) {
          const __m512i halves =
              _mm512_mask_blend_epi16(0x55555555u, _mm512_slli_epi32(hi[t][g], 16), lo[t][g]);
          sum[t][g] = _mm512_dpwssd_epi32(sum[t][g], halves, sc[g]);
        }
    }
    __m512i min[T][G];
    for (int t = 0; t < T; ++t)
      for (int g = 0; g < G; ++g) min[t][g] = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {
      __m512i m[G];
      for (int g = 0; g < G; ++g)
        m[g] = byte_pairs(rec[g] + kMinBytes + 32 * p, rec[g] + kMinBytes + 32 * p + 16);
      for (int t = 0; t < T; ++t) {
        int32_t two;  // the token's sums of sub-blocks 2p and 2p + 1
        __builtin_memcpy(&two, x.sum32[t] + 8 * s + 2 * p, 4);
        const __m512i sums = _mm512_set1_epi32(two);
        for (int g = 0; g < G; ++g) min[t][g] = _mm512_dpwssd_epi32(min[t][g], m[g], sums);
      }
    }
    for (int g = 0; g < G; ++g) {
      const __m512 d =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec[g])));
      const __m512 dmin =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec[g] + 32)));
      for (int t = 0; t < T; ++t) {
        const __m512 v = _mm512_fmsub_ps(_mm512_cvtepi32_ps(sum[t][g]), d,
                                         _mm512_mul_ps(_mm512_cvtepi32_ps(min[t][g]), dmin));
        acc[t][g] = _mm512_fmadd_ps(v, _mm512_set1_ps(x.d[t][s]), acc[t][g]);
      }
    }
  }
  for (int t = 0; t < T; ++t) store_rows<G>(a, t, acc[t]);
}

template <int G>
void by_tokens(const PackedArgs& a, int n_tok) {
  static_assert(kPackedPer256TileTokens == 3, "cases below");
  switch (n_tok) {
    case 1:
      return tile_q4_k<G, 1>(a);
    case 2:
      return tile_q4_k<G, 2>(a);
    default:
      return tile_q4_k<G, 3>(a);
  }
}

}  // namespace

void packed_tile_q4_k(const PackedArgs& a, int n_tok) {
  static_assert(kPackedTileGroups == 2, "one or two groups below");
  if (a.n_rows > 16)
    by_tokens<2>(a, n_tok);
  else
    by_tokens<1>(a, n_tok);
}

}  // namespace loom::kernels::cpu
