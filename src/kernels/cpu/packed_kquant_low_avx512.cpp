// AVX-512 (VNNI) tiles for kRows16-packed Q2_K and Q3_K matrices (layouts in kernels/packed.h),
// against the activations quantized with one scale per 256 columns (PackedActRow's q256).
//
// Both have 16-column sub-blocks with small integer scales. A pair of sub-blocks' exact integer
// dots D_2p, D_2p+1 (vpdpbusd of the u8 weights with the int8 activations, 4 steps each) meet in
// one int32 lane per row as (D_2p+1 << 16) + D_2p + 16384, which vpdpwssd multiplies by the row's
// int16 scale pair (sc_2p, sc_2p+1) and adds to the super-block's sum S, which starts at
// -16384 * (sc_0 + sc_2 + ... + sc_14): S ends as the exact sum_j sc_j D_j. (The 16384 keeps the
// low half positive, so nothing borrows from the high half: |D| <= 4 * 127 * 16 = 8128.) With
// one activation scale per super-block, its float epilogue is one per super-block, not one per
// pair as with the per-32 activations before (from L1, one thread, 1,024 columns, ns per
// super-block and token: one token on one group Q2_K 49.0-62.2 -> 43.9-44.3, Q3_K 46.3-47.0 ->
// 45.9-46.1; a token of a full two-group tile Q2_K 30.9 (of six) -> 26.9 (of three), Q3_K 28.3
// -> 26.4; the q unpacking, not the epilogue, is most of the rest).
//   Q3_K: q in 0..7 from three vectors per pair (packed.h), the dots start at -4 * sum(x) so D
//   is the dot of q - 4; acc += d * d_x * S.
//   Q2_K: q = 2 bits (0..3); the mins' term M = sum_j m_j sum_j(x) is one vpdpwssd per pair, the
//   row's min pair with the token's two int16 sums; acc += d_x * (d * S - dmin * M).
// Integer parts exact, float order fixed per token: a token's result does not depend on the
// tile it is computed in. Up to kPackedPer256TileTokens tokens (the sums per token and group
// take registers).
#include <immintrin.h>

#include "kernels/cpu/packed_kernels.h"
#include "kernels/cpu/packed_tile_util.h"
#include "kernels/packed.h"

namespace loom::kernels::cpu {
namespace {

// Where a record's q start (packed.h): Q2_K's plane per sub-block, Q3_K's three vectors per pair.
constexpr int kQ2KLow = 64 + 16 * kPackRows;  // after d, dmin and the scale bytes
constexpr int kQ3KQ = 32 + 16 * kPackRows;    // after d and the scales

// Slot s (0..7) of a Q3_K pair's vectors a, b, c (packed.h): 1 to 4 ops.
[[gnu::always_inline]] inline __m512i q3_k_slot(int s, __m512i a, __m512i b, __m512i c) {
  const __m512i seven = _mm512_set1_epi8(7), three = _mm512_set1_epi8(3);
  constexpr int kSelect = 0xE4;  // vpternlog: c ? a : b
  switch (s) {
    case 0:
      return _mm512_and_si512(a, seven);
    case 1:
      return _mm512_and_si512(_mm512_srli_epi16(a, 3), seven);
    case 2:
      return _mm512_and_si512(b, seven);
    case 3:
      return _mm512_and_si512(_mm512_srli_epi16(b, 3), seven);
    case 4:
      return _mm512_and_si512(c, seven);
    case 5:
      return _mm512_and_si512(_mm512_srli_epi16(c, 3), seven);
    case 6:
      return _mm512_and_si512(_mm512_ternarylogic_epi32(_mm512_srli_epi16(a, 6),
                                                        _mm512_srli_epi16(b, 4), three, kSelect),
                              seven);
    default:
      return _mm512_and_si512(_mm512_ternarylogic_epi32(_mm512_srli_epi16(c, 6),
                                                        _mm512_srli_epi16(b, 5), three, kSelect),
                              seven);
  }
}

template <bool kQ3, int G, int T>
void tile_q2_k_q3_k(const PackedArgs& a) {
  constexpr int kRec = kQ3 ? kPackedQ3KBytes : kPackedQ2KBytes;
  constexpr int kScales = kQ3 ? 32 : 64;
  const int64_t nsb = a.cols / 256;
  const Per256Rows<T> x(a);
  const RecordPrefetch<kRec> prefetch(a);
  const __m512i three = _mm512_set1_epi8(3);
  const __m512i low_offset = _mm512_set1_epi32(16384);
  const __m512i minus_offset = _mm512_set1_epi32(0x0000C000);  // int16 pair (-16384, 0)
  // The rows' scale pairs (sc_2p, sc_2p+1) of pair p as int16 pairs (Q2_K: and the mins').
  auto scale_pairs = [&](const uint8_t* r, int p, __m512i* mins) {
    const __m256i bytes =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r + kScales + 32 * p));
    if constexpr (kQ3) {
      return _mm512_cvtepi8_epi16(bytes);
    } else {
      const __m512i both = _mm512_cvtepu8_epi16(bytes);  // sc | m << 4
      *mins = _mm512_srli_epi16(both, 4);
      return _mm512_and_si512(both, _mm512_set1_epi16(15));
    }
  };
  __m512 acc[T][G];
  for (int t = 0; t < T; ++t)
    for (int g = 0; g < G; ++g) acc[t][g] = _mm512_setzero_ps();
  for (int64_t s = 0; s < nsb; ++s) {
    const uint8_t* rec[G];
    for (int g = 0; g < G; ++g) rec[g] = a.w + (g * nsb + s) * kRec;
    // S starts at -16384 * (the even sub-blocks' scales), which the even dots' offset adds.
    __m512i sum[T][G];
    [[maybe_unused]] __m512i min[T][G];
    for (int g = 0; g < G; ++g) {
      __m512i fix = _mm512_setzero_si512(), unused;
      for (int p = 0; p < 8; ++p)
        fix =
            _mm512_add_epi32(fix, _mm512_madd_epi16(scale_pairs(rec[g], p, &unused), minus_offset));
      for (int t = 0; t < T; ++t) {
        sum[t][g] = fix;
        if constexpr (!kQ3) min[t][g] = _mm512_setzero_si512();
      }
    }
    // Q3_K: each sub-block's dot starts at -4 * sum(x), the even ones' plus 16384.
    alignas(64) int32_t start[kQ3 ? T : 1][16];
    if constexpr (kQ3) {
      const __m512i even = _mm512_set_epi32(0, 16384, 0, 16384, 0, 16384, 0, 16384, 0, 16384, 0,
                                            16384, 0, 16384, 0, 16384);
      for (int t = 0; t < T; ++t) {
        const __m512i sums = _mm512_cvtepi16_epi32(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.sum16[t] + 16 * s)));
        _mm512_store_si512(start[t], _mm512_sub_epi32(even, _mm512_slli_epi32(sums, 2)));
      }
    }
    for (int p = 0; p < 8; ++p) {
      prefetch.template part<G, 8>(rec, p);
      __m512i pair[G];
      [[maybe_unused]] __m512i min_pair[G];
      for (int g = 0; g < G; ++g) pair[g] = scale_pairs(rec[g], p, &min_pair[g]);
      [[maybe_unused]] __m512i q3[G][3];  // Q3_K: the pair's vectors a, b, c
      if constexpr (kQ3)
        for (int g = 0; g < G; ++g)
          for (int m = 0; m < 3; ++m)
            q3[g][m] = _mm512_loadu_si512(rec[g] + kQ3KQ + 192 * p + 64 * m);
      __m512i dot[T][G];
      // Sub-block 2p + 1 first: its dot goes to the high half. Unrolled so that q3_k_slot's slot
      // is a constant: GCC kept these loops rolled for some tile shapes, and Q3_K's 2-token tile
      // ran 135 ns per 32 rows x 256 columns instead of 111 (`loom_kernels_bench tiles`).
#pragma GCC unroll 2
      for (int half = 1; half >= 0; --half) {
        const int j = 2 * p + half;
        for (int t = 0; t < T; ++t) {
          if (half == 1) {
            const __m512i init = kQ3 ? _mm512_set1_epi32(start[t][j]) : _mm512_setzero_si512();
            for (int g = 0; g < G; ++g) dot[t][g] = init;
          } else {
            const __m512i init = kQ3 ? _mm512_set1_epi32(start[t][j]) : low_offset;
            for (int g = 0; g < G; ++g)
              dot[t][g] = _mm512_add_epi32(_mm512_slli_epi32(dot[t][g], 16), init);
          }
        }
        __m512i low[G];  // Q2_K: the sub-block's plane
        if constexpr (!kQ3)
          for (int g = 0; g < G; ++g) low[g] = _mm512_loadu_si512(rec[g] + kQ2KLow + 64 * j);
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          __m512i w[G];
          for (int g = 0; g < G; ++g) {
            if constexpr (kQ3)
              w[g] = q3_k_slot(4 * (1 - half) + k, q3[g][0], q3[g][1], q3[g][2]);
            else
              w[g] = _mm512_and_si512(k == 0 ? low[g] : _mm512_srli_epi16(low[g], 2 * k), three);
          }
          for (int t = 0; t < T; ++t) {
            const __m512i xv = bcast4(x.q[t] + 256 * s + 16 * j + 4 * k);
            for (int g = 0; g < G; ++g) dot[t][g] = _mm512_dpbusd_epi32(dot[t][g], w[g], xv);
          }
        }
      }
      for (int t = 0; t < T; ++t) {
        [[maybe_unused]] __m512i sums;
        if constexpr (!kQ3) {
          int32_t two;  // sum16 of sub-blocks 2p and 2p + 1
          __builtin_memcpy(&two, x.sum16[t] + 16 * s + 2 * p, 4);
          sums = _mm512_set1_epi32(two);
        }
        for (int g = 0; g < G; ++g) {
          sum[t][g] = _mm512_dpwssd_epi32(sum[t][g], dot[t][g], pair[g]);
          if constexpr (!kQ3) min[t][g] = _mm512_dpwssd_epi32(min[t][g], min_pair[g], sums);
        }
      }
    }
    for (int g = 0; g < G; ++g) {
      const __m512 d =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec[g])));
      [[maybe_unused]] __m512 dmin;
      if constexpr (!kQ3)
        dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec[g] + 32)));
      for (int t = 0; t < T; ++t) {
        const __m512 vdx = _mm512_set1_ps(x.d[t][s]);
        const __m512 sum_f = _mm512_cvtepi32_ps(sum[t][g]);
        if constexpr (kQ3) {
          acc[t][g] = _mm512_fmadd_ps(sum_f, _mm512_mul_ps(d, vdx), acc[t][g]);
        } else {
          const __m512 v =
              _mm512_fmsub_ps(sum_f, d, _mm512_mul_ps(_mm512_cvtepi32_ps(min[t][g]), dmin));
          acc[t][g] = _mm512_fmadd_ps(v, vdx, acc[t][g]);
        }
      }
    }
  }
  for (int t = 0; t < T; ++t) store_rows<G>(a, t, acc[t]);
}

template <bool kQ3>
struct Q2KQ3KTile {
  template <int G, int T>
  static void run(const PackedArgs& a) {
    tile_q2_k_q3_k<kQ3, G, T>(a);
  }
};

}  // namespace

void packed_tile_q2_k_q3_k(Dtype dtype, const PackedArgs& a, int n_tok) {
  if (dtype == Dtype::kQ3_K)
    run_per256_tile<Q2KQ3KTile<true>>(a, n_tok);
  else
    run_per256_tile<Q2KQ3KTile<false>>(a, n_tok);
}

}  // namespace loom::kernels::cpu
