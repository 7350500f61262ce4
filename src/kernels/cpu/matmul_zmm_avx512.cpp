// AVX-512 matmul kernels on full 512-bit registers (the kernels of matmul_simd-inl.h use
// 256-bit vectors on every ISA): Q8_0/Q4_0 with one vpdpbusd covering the same 32-block of two
// weight rows.
//
// Quantized layout: a zmm holds block b of row r (low 256 bits) and of row r + 1 (high 256
// bits), so the token's activation block is a plain 256-bit broadcast and its scale a scalar
// broadcast. vpdpbusd wants u8 x s8: activations come as x + 128 (ActFormat::kQ8_32U) and the
// weights stay signed; the accumulator starts at -128 * (sum of the lane's 4 weights), which
// makes every int32 lane the exact dot of its 4 elements. Per output the arithmetic is: per
// block, 8 exact int lanes -> float, times (d_w * d_x), FMA into 8 float lanes; at the end the
// 8 lanes are summed in a fixed tree. Which half (row pair position) or which tile a row sits
// in does not change any of it, so results are batch- and thread-invariant.
#include <immintrin.h>

#include <array>
#include <cstring>
#include <utility>

#include "kernels/cpu/matmul_kernels.h"
#include "kernels/quant_blocks.h"

// GCC 12 warns about the undefined upper halves of _mm512_cast* inside its own headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace loom::kernels::cpu {
namespace {

// Fixed-order horizontal sum of 8 floats.
inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline __m128i load128(const void* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// 8 lanes of d0 then 8 lanes of d1 (fp16 scales of the two rows' blocks).
inline __m512 pair_scales(uint16_t d0, uint16_t d1) {
  const __m256i h =
      _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(static_cast<short>(d0))),
                              _mm_set1_epi16(static_cast<short>(d1)), 1);
  return _mm512_cvtph_ps(h);
}

// Block b of two rows as signed int8 (row 0 in the low half), and their scales.
struct PairQ8_0 {
  static constexpr int kBlockBytes = sizeof(BlockQ8_0);
  static __m512i weights(const uint8_t* r0, const uint8_t* r1, int64_t b, __m512* dw) {
    const auto* b0 = reinterpret_cast<const BlockQ8_0*>(r0) + b;
    const auto* b1 = reinterpret_cast<const BlockQ8_0*>(r1) + b;
    *dw = pair_scales(b0->d, b1->d);
    return _mm512_inserti64x4(_mm512_castsi256_si512(load256(b0->qs)), load256(b1->qs), 1);
  }
};
struct PairQ4_0 {
  static constexpr int kBlockBytes = sizeof(BlockQ4_0);
  static __m512i weights(const uint8_t* r0, const uint8_t* r1, int64_t b, __m512* dw) {
    const auto* b0 = reinterpret_cast<const BlockQ4_0*>(r0) + b;
    const auto* b1 = reinterpret_cast<const BlockQ4_0*>(r1) + b;
    *dw = pair_scales(b0->d, b1->d);
    const __m256i y =
        _mm256_inserti128_si256(_mm256_castsi128_si256(load128(b0->qs)), load128(b1->qs), 1);
    // [q0 | q1 | q0 >> 4 | q1 >> 4] -> [q0 | q0 >> 4 | q1 | q1 >> 4]: elements 0..15 are the
    // low nibbles, 16..31 the high ones.
    const __m512i t = _mm512_inserti64x4(_mm512_castsi256_si512(y), _mm256_srli_epi16(y, 4), 1);
    const __m512i u = _mm512_shuffle_i64x2(t, t, _MM_SHUFFLE(3, 1, 2, 0));
    return _mm512_sub_epi8(_mm512_and_si512(u, _mm512_set1_epi8(0x0F)), _mm512_set1_epi8(8));
  }
};

// Software prefetch distance along each weight row. The rows of a tile are adjacent, so this
// reaches ~15 rows ahead and the tiles' prefetches together cover the stream once. Measured
// with loom_kernels_bench (1024x32000 Q8_0 GEMV, 1 thread): 24 blocks 10.8 GB/s, 8 KiB 30,
// 16 KiB 33 (the hardware prefetchers stop at 4 KiB pages).
constexpr int kPrefetchBytes = 16384;

// P row pairs x T tokens; n_rows in [2P - 1, 2P] (an odd last row is paired with itself and its
// copy discarded).
template <class Pair, int P, int T>
void q32_tile(const TileArgs& a, int n_rows) {
  const int64_t nb = a.cols / 32;
  const uint8_t* rows[2 * P];
  for (int i = 0; i < 2 * P; ++i) rows[i] = a.w + (i < n_rows ? i : n_rows - 1) * a.w_stride;
  const float* xd[T];
  for (int t = 0; t < T; ++t) xd[t] = reinterpret_cast<const float*>(a.x + t * a.x_stride + a.cols);
  __m512 acc[P][T];
  for (int p = 0; p < P; ++p)
    for (int t = 0; t < T; ++t) acc[p][t] = _mm512_setzero_ps();
  const __m512i k128 = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i zero = _mm512_setzero_si512();
  for (int64_t b = 0; b < nb; ++b) {
    __m512i w[P], init[P];
    __m512 dw[P];
    // Weight rows stream from DRAM in decode: prefetch well ahead of the hardware prefetcher.
    if (a.prefetch)
      for (int i = 0; i < 2 * P; ++i)
        _mm_prefetch(
            reinterpret_cast<const char*>(rows[i] + b * Pair::kBlockBytes + kPrefetchBytes),
            _MM_HINT_T0);
    for (int p = 0; p < P; ++p) {
      w[p] = Pair::weights(rows[2 * p], rows[2 * p + 1], b, &dw[p]);
      init[p] = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, k128, w[p]));
    }
    for (int t = 0; t < T; ++t) {
      const __m512i xb = _mm512_broadcast_i64x4(load256(a.x + t * a.x_stride + 32 * b));
      const __m512 dx = _mm512_set1_ps(xd[t][b]);
      for (int p = 0; p < P; ++p) {
        const __m512i prod = _mm512_dpbusd_epi32(init[p], xb, w[p]);
        acc[p][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(prod), _mm512_mul_ps(dw[p], dx), acc[p][t]);
      }
    }
  }
  for (int p = 0; p < P; ++p)
    for (int t = 0; t < T; ++t) {
      float* o = a.out + t * a.out_stride + 2 * p;
      o[0] = hsum8(_mm512_castps512_ps256(acc[p][t]));
      if (2 * p + 1 < n_rows) o[1] = hsum8(_mm512_extractf32x8_ps(acc[p][t], 1));
    }
}

template <class Pair, int P, int T>
void q32_dispatch(const TileArgs& a, int n_rows, int n_tok) {
  using Fn = void (*)(const TileArgs&, int);
  static constexpr auto table = []<size_t... I>(std::index_sequence<I...>) {
    return std::array<Fn, P * T>{&q32_tile<Pair, I / T + 1, I % T + 1>...};
  }
  (std::make_index_sequence<P * T>{});
  table[((n_rows + 1) / 2 - 1) * T + (n_tok - 1)](a, n_rows);
}

// 32 zmm registers: 2 row pairs x 8 tokens = 16 accumulators + per pair (weights, init,
// scales). The model repacks Q8_0/Q4_0 at load (kernels/packed.h) and uses these row-layout
// kernels only where a matrix is not packed; float weights: matmul_zmm_float_avx512.cpp.
constexpr MatmulKernel kQ8_0{ActFormat::kQ8_32U, q32_dispatch<PairQ8_0, 2, 8>, 4, 8};
constexpr MatmulKernel kQ4_0{ActFormat::kQ8_32U, q32_dispatch<PairQ4_0, 2, 8>, 4, 8};

}  // namespace

const MatmulKernel* avx512_zmm_kernel(Dtype w) {
  switch (w) {
    case Dtype::kQ8_0:
      return &kQ8_0;
    case Dtype::kQ4_0:
      return &kQ4_0;
    default:
      return nullptr;
  }
}

}  // namespace loom::kernels::cpu
