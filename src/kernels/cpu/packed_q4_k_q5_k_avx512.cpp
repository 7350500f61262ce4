// AVX-512 (VNNI) tile for kRows16-packed Q4_K and Q5_K matrices (layout in kernels/packed.h)
// against the activations quantized with one scale per 256 columns (PackedActRow's q256 / d256 /
// sum256_32).
//
// A Q4_K value is d * sc_j * q - dmin * m_j for 32-column sub-block j, with q in 0..15 and the
// 6-bit sc_j, m_j per row. With one activation scale d_x per super-block the whole super-block
// is two exact integers per row and token,
//   S = sum_j sc_j * sum_{i in j} q_i x_i,   M = sum_j m_j * sum_{i in j} x_i,
// and one float epilogue, acc += d_x * (d * S - dmin * M), instead of one per 32 columns (three
// float ops per row group, token and sub-block, which shared the vpdpbusd ports). From L1 (one
// thread, 1,024 columns, ns per super-block of 32 rows against the per-32 tile): one token 80.7
// -> 70.3; a token of a full tile 51.3 (six tokens) -> 46.0 (three).
// The 64-byte steps of a pair of sub-blocks hold j's q in their low nibbles and j + 1's in the
// high ones: each step is loaded once and masked twice, the high nibbles in place (v & 0xF0 =
// 16 q), so j + 1's dot comes out 16 times too large and j's scale is taken 16 times too: the
// integers summed are 16 S (|16 S| <= 16 * 8 * 63 * 15 * 127 * 32 < 2^31), shifted back once per
// super-block. Each sub-block's dot meets its row's scale in one vpmulld. M is one vpdpwssd per
// pair of sub-blocks, (m_2p, m_2p+1) against the token's two int16 sums of 32. Per step and row
// group that is two ANDs where the dots of each half used to be unpacked by shift, and per
// sub-block a multiply where two 16-bit halves were packed for vpdpwssd: with the vector
// pipes the tile's bound (two 512-bit ops a cycle, vpdpbusd and vpmulld one), one token's tile
// from L1 (loom_kernels_bench tiles, ns per 256 columns of 32 rows) 70.3 -> 58.8, two tokens
// 101.6 -> 92-97, three 137.7 -> 136-138.
// Q5_K is the same with q in 0..31, bit 4 from the step's 64-bit mask: its high nibbles are
// shifted down (16 q would not fit a byte), and the sums are S itself (|S| <= 8 * 63 * 31 * 127
// * 32). Against the per-32 Q5_K tile it replaced, one token from L1 113.0 -> 99.5 ns, two 156.1 ->
// 133.2, a token of a full tile 60.9 (six tokens) -> 58.8 (three).
// Integer parts exact, one float order per token: a token's result does not depend on the tile
// it is computed in (batch invariance), and a scalar redo of this arithmetic matches it bit for
// bit (PackedQ4_K and PackedQ5_K tests).
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

// vpermw's index that interleaves 32 int16 (m_2p of rows 0..15, then m_2p+1 of rows 0..15) into
// row r's int32 lane as the pair (m_2p, m_2p+1).
inline __m512i min_pair_index() {
  alignas(64) static constexpr uint16_t kIndex[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                                      21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                                      11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  return _mm512_load_si512(kIndex);
}

// kQ5: Q5_K, whose records are Q4_K's with bit 4 of each q after them (packed.h).
template <bool kQ5, int G, int T>
void tile_q4_k_q5_k(const PackedArgs& a) {
  constexpr int kRec = kQ5 ? kPackedQ5KBytes : kPackedQ4KBytes;
  // Q4_K's sums are 16 S (the high nibbles taken in place), Q5_K's S.
  constexpr int kShift = kQ5 ? 0 : 4;
  const int64_t nsb = a.cols / 256;
  const Per256Rows<T> x(a);
  const RecordPrefetch<kRec> prefetch(a);
  const __m512i low_nib = _mm512_set1_epi8(0x0F), high_nib = _mm512_set1_epi8(-16);
  [[maybe_unused]] const __m512i sixteen = _mm512_set1_epi8(0x10);
  const __m512i min_pairs = min_pair_index();
  __m512 acc[T][G];
  for (int t = 0; t < T; ++t)
    for (int g = 0; g < G; ++g) acc[t][g] = _mm512_setzero_ps();
  for (int64_t s = 0; s < nsb; ++s) {
    const uint8_t* rec[G];
    for (int g = 0; g < G; ++g) rec[g] = a.w + (g * nsb + s) * kRec;
    // 16 * S: a pair of sub-blocks shares its 64-byte steps (j's q in the low nibbles, j + 1's
    // in the high ones), and the high nibbles are taken in place (v & 0xF0 = 16 q): their dot
    // is 16 times the sub-block's, so the even sub-block's scale is taken times 16 too. That
    // saves a shift per step; the one exact shift back comes per super-block.
    __m512i scaled_sum[T][G];  // 2^kShift * S
    for (int t = 0; t < T; ++t)
      for (int g = 0; g < G; ++g) scaled_sum[t][g] = _mm512_setzero_si512();
    for (int jp = 0; jp < 4; ++jp) {
      prefetch.template part<G, 4>(rec, jp);
      const int8_t* x_j[T];
      for (int t = 0; t < T; ++t) x_j[t] = x.q[t] + 256 * s + 64 * jp;
      // Per sub-block h (0: low nibbles, 1: high) the dots of its steps: a one-token tile in two
      // chains (steps 0-3 and 4-7), for the vpdpbusd latency; larger tiles have chains enough.
      constexpr int kChains = T == 1 ? 2 : 1;
      __m512i dot[2][kChains][T][G];
      for (int h = 0; h < 2; ++h)
        for (int c = 0; c < kChains; ++c)
          for (int t = 0; t < T; ++t)
            for (int g = 0; g < G; ++g) dot[h][c][t][g] = _mm512_setzero_si512();
              // Unrolled: the chain of step k is then a register (Q5_K's longer body was left a
              // loop, its dots indexed in memory: 1.3x slower).
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        __m512i w[2][G];
        for (int g = 0; g < G; ++g) {
          const __m512i v = _mm512_loadu_si512(rec[g] + kQuantBytes + 512 * jp + 64 * k);
          if constexpr (kQ5) {
            // q = nibble | bit 4 from the step's 64-bit mask of sub-block 2 jp + h.
            __mmask64 high0, high1;
            __builtin_memcpy(&high0, rec[g] + kPackedQ4KBytes + 8 * (16 * jp + k), 8);
            __builtin_memcpy(&high1, rec[g] + kPackedQ4KBytes + 8 * (16 * jp + 8 + k), 8);
            const __m512i lo = _mm512_and_si512(v, low_nib);
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low_nib);
            w[0][g] = _mm512_mask_add_epi8(lo, high0, lo, sixteen);  // | 16: bit 4 is clear
            w[1][g] = _mm512_mask_add_epi8(hi, high1, hi, sixteen);
          } else {
            w[0][g] = _mm512_and_si512(v, low_nib);
            w[1][g] = _mm512_and_si512(v, high_nib);
          }
        }
        const int c = k * kChains / 8;
        for (int h = 0; h < 2; ++h)
          for (int t = 0; t < T; ++t) {
            const __m512i xv = bcast4(x_j[t] + 32 * h + 4 * k);
            for (int g = 0; g < G; ++g)
              dot[h][c][t][g] = _mm512_dpbusd_epi32(dot[h][c][t][g], w[h][g], xv);
          }
      }
      for (int h = 0; h < 2; ++h) {
        __m512i sc[G];  // the rows' 6-bit scales of sub-block 2 jp + h, times 16 for h = 0
        for (int g = 0; g < G; ++g) {
          sc[g] = _mm512_cvtepu8_epi32(_mm_loadu_si128(
              reinterpret_cast<const __m128i*>(rec[g] + kScaleBytes + 16 * (2 * jp + h))));
          if (h == 0) sc[g] = _mm512_slli_epi32(sc[g], kShift);
        }
        for (int t = 0; t < T; ++t)
          for (int g = 0; g < G; ++g) {
            const __m512i d =
                kChains == 1 ? dot[h][0][t][g] : _mm512_add_epi32(dot[h][0][t][g], dot[h][1][t][g]);
            scaled_sum[t][g] = _mm512_add_epi32(scaled_sum[t][g], _mm512_mullo_epi32(d, sc[g]));
          }
      }
    }
    __m512i sum[T][G];
    for (int t = 0; t < T; ++t)
      for (int g = 0; g < G; ++g) sum[t][g] = _mm512_srai_epi32(scaled_sum[t][g], kShift);
    __m512i min[T][G];
    for (int t = 0; t < T; ++t)
      for (int g = 0; g < G; ++g) min[t][g] = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {
      __m512i m[G];  // (m_2p, m_2p+1) of each row as an int16 pair
      for (int g = 0; g < G; ++g)
        m[g] = _mm512_permutexvar_epi16(
            min_pairs, _mm512_cvtepu8_epi16(_mm256_loadu_si256(
                           reinterpret_cast<const __m256i*>(rec[g] + kMinBytes + 32 * p))));
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

template <bool kQ5>
struct Q4KQ5KTile {
  template <int G, int T>
  static void run(const PackedArgs& a) {
    tile_q4_k_q5_k<kQ5, G, T>(a);
  }
};

}  // namespace

void packed_tile_q4_k_q5_k(Dtype dtype, const PackedArgs& a, int n_tok) {
  if (dtype == Dtype::kQ5_K)
    run_per256_tile<Q4KQ5KTile<true>>(a, n_tok);
  else
    run_per256_tile<Q4KQ5KTile<false>>(a, n_tok);
}

}  // namespace loom::kernels::cpu
