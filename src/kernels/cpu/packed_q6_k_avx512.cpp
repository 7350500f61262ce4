// AVX-512 (VNNI) tile for kRows16-packed Q6_K matrices (layout in kernels/packed.h) against the
// activations quantized with one scale per 256 columns (PackedActRow's q256 / d256 / sum256_16),
// as the Q4_K tile (packed_q4_k_q5_k_avx512.cpp) and llama.cpp's Q8_K.
//
// A Q6_K value is d * sc_j * (q - 32) for 16-column sub-block j, with q in 0..63 and the int8
// sc_j per row. With one activation scale d_x per super-block the whole super-block is one exact
// integer per row and token,
//   S = sum_j sc_j * sum_{i in j} (q_i - 32) x_i   (|S| <= 16 * 128 * 32 * 127 * 16 < 2^31),
// each sub-block's dot started at -32 * sum(x) of its 16 values and met by its row's scale in
// one vpmulld, and one float epilogue, acc += (d * d_x) * S. Against the per-32 tile it
// replaces (a float scale, multiply and FMA per row group, token and 16 columns, on the
// vpdpbusd pipes) that is one vpmulld per row group, token and sub-block.
// Integer parts exact, one float order per token: a token's result does not depend on the tile
// it is computed in (batch invariance).
#include <immintrin.h>

#include "kernels/cpu/packed_kernels.h"
#include "kernels/cpu/packed_tile_util.h"
#include "kernels/packed.h"

namespace loom::kernels::cpu {
namespace {

constexpr int kScaleBytes = 32;   // after 16 fp16 d
constexpr int kQuantBytes = 288;  // after 16 sub-blocks x 16 rows of int8 scales

template <int G, int T>
void tile_q6_k(const PackedArgs& a) {
  constexpr int kRec = kPackedQ6KBytes;
  const int64_t nsb = a.cols / 256;
  const Per256Rows<T> x(a);
  const RecordPrefetch<kRec> prefetch(a);
  const __m512i low6 = _mm512_set1_epi8(63);
  constexpr int kXorAnd = 0x28;  // vpternlog: (a ^ b) & c
  __m512 acc[T][G];
  for (int t = 0; t < T; ++t)
    for (int g = 0; g < G; ++g) acc[t][g] = _mm512_setzero_ps();
  for (int64_t s = 0; s < nsb; ++s) {
    const uint8_t* rec[G];
    for (int g = 0; g < G; ++g) rec[g] = a.w + (g * nsb + s) * kRec;
    __m512i sum[T][G];
    for (int t = 0; t < T; ++t)
      for (int g = 0; g < G; ++g) sum[t][g] = _mm512_setzero_si512();
    for (int j = 0; j < 16; ++j) {
      prefetch.template part<G, 16>(rec, j);
      const int64_t col = 256 * s + 16 * j;
      // A one-token tile's dots in two chains (steps 0-1 and 2-3), for the vpdpbusd latency;
      // larger tiles have chains enough.
      constexpr int kChains = T == 1 ? 2 : 1;
      __m512i dot[kChains][T][G];
      for (int t = 0; t < T; ++t) {
        const __m512i start = _mm512_set1_epi32(-32 * x.sum16[t][col / 16]);
        for (int g = 0; g < G; ++g) {
          dot[0][t][g] = start;
          if constexpr (kChains == 2) dot[1][t][g] = _mm512_setzero_si512();
        }
      }
      // Step k's q from the sub-block's vectors s0..s2 (packed.h): 16-bit shifts move bits 0-1
      // of the next byte into bits 6-7, which the & 63 drops.
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
        const int c = k * kChains / 4;
        for (int t = 0; t < T; ++t) {
          const __m512i xv = bcast4(x.q[t] + col + 4 * k);
          for (int g = 0; g < G; ++g) dot[c][t][g] = _mm512_dpbusd_epi32(dot[c][t][g], w[g], xv);
        }
      }
      __m512i sc[G];
      for (int g = 0; g < G; ++g)
        sc[g] = _mm512_cvtepi8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(rec[g] + kScaleBytes + 16 * j)));
      for (int t = 0; t < T; ++t)
        for (int g = 0; g < G; ++g) {
          const __m512i d =
              kChains == 1 ? dot[0][t][g] : _mm512_add_epi32(dot[0][t][g], dot[kChains - 1][t][g]);
          sum[t][g] = _mm512_add_epi32(sum[t][g], _mm512_mullo_epi32(d, sc[g]));
        }
    }
    for (int g = 0; g < G; ++g) {
      const __m512 d =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec[g])));
      for (int t = 0; t < T; ++t)
        acc[t][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[t][g]),
                                    _mm512_mul_ps(d, _mm512_set1_ps(x.d[t][s])), acc[t][g]);
    }
  }
  for (int t = 0; t < T; ++t) store_rows<G>(a, t, acc[t]);
}

struct Q6KTile {
  template <int G, int T>
  static void run(const PackedArgs& a) {
    tile_q6_k<G, T>(a);
  }
};

}  // namespace

void packed_tile_q6_k(const PackedArgs& a, int n_tok) {
  run_per256_tile<Q6KTile>(a, n_tok);
}

}  // namespace loom::kernels::cpu
