// AVX-512 matmul kernels for Q4_K, Q5_K and Q6_K weights on full 512-bit registers, against
// Q8_K activations (the same activation format as the 256-bit and scalar kernels).
//
// A zmm holds 64 consecutive elements of a super-block (a "chunk"): the weights as u8 (0..15,
// 0..31 or 0..63, unpacked once per tile row) and the token's int8 activations (a plain load).
// Per chunk and output: vpmaddubsw (u8 x s8 pair sums, exact: |sum| <= 2 * 63 * 128) then
// vpdpwssd against the int16 sub-block scales, into one int32 accumulator per output and
// super-block. At the end of a super-block the accumulators of one row's T tokens are reduced
// together (a transposing hadd tree), the mins / the Q6_K offset are applied in integer from
// the Q8_K block sums, and the float part runs on a vector of the T tokens:
//   acc = fma(d_w * d_x, float(isum), acc);  acc = fma(-(dmin_w * d_x), float(msum), acc)
// which is, lane by lane, exactly the scalar kernels' arithmetic (matmul_scalar.cpp): integer
// sums do not depend on their order and the two FMAs per super-block are the same IEEE
// operations. So results are bit-identical to every other ISA, whatever the tile shape, the
// row's place in it or the thread count (KQuantSimdMatchesScalarExactly checks it).
#include <immintrin.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/cpu/matmul_kernels.h"
#include "kernels/quant_blocks.h"

// GCC 12 warns about the undefined upper halves of _mm512_cast* inside its own headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace loom::kernels::cpu {
namespace {

// Same distance as the other kernels (see matmul_zmm_avx512.cpp).
constexpr int64_t kPrefetchBytes = 16384;

inline float half_to_float(uint16_t h) {
  return _cvtsh_ss(h);
}
inline __m512i bcast256(const void* p) {
  return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
// vpermw indices: lane i of table[c] = base(c) + i / group.
struct Spread {
  alignas(64) int16_t idx[4][32];
  constexpr Spread(int step, int base, int group) : idx{} {
    for (int c = 0; c < 4; ++c)
      for (int i = 0; i < 32; ++i) idx[c][i] = static_cast<int16_t>(base + step * c + i / group);
  }
  __m512i apply(int c, __m512i v) const {
    return _mm512_permutexvar_epi16(_mm512_load_si512(idx[c]), v);
  }
};
constexpr Spread kScales4K(2, 0, 16);  // Q4_K/Q5_K chunk c: sub-blocks 2c, 2c + 1 (32 each)
constexpr Spread kMinPairs(0, 8, 2);   // mins m_j (lanes 8 + j) in lanes 2j, 2j + 1
constexpr Spread kScales6K(4, 0, 8);   // Q6_K chunk c: sub-blocks 4c .. 4c + 3 (16 each)

// The weight side of one row and super-block. Each format provides:
//   prep(row, b)   scales (int16 lanes of sc16), d, dmin, pointers
//   weights(c)     chunk c (elements 64c .. 64c + 63) as u8
//   scales(c)      chunk c's scales as int16 per pair of elements
//   int_fix(y, x)  y + the integer correction from the Q8_K block sums (Q6_K offset)
//   has_mins       Q4_K/Q5_K: msum(x) = sum_j m_j * (bsum_2j + bsum_2j+1)

// Q4_K / Q5_K: chunk c = sub-blocks 2c (low nibbles of qs[32c ..]) and 2c + 1 (high nibbles).
template <bool kFive>
struct KMinsRow {
  using Block = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
  static constexpr int kBytes = sizeof(Block);
  static constexpr bool kHasMins = true;
  const Block* blk;
  float d, dmin;
  __m512i sc16;  // int16 lanes 0..7: scales, 8..15: mins

  void prep(const uint8_t* row, int64_t b) {
    blk = reinterpret_cast<const Block*>(row) + b;
    d = half_to_float(blk->d);
    dmin = half_to_float(blk->dmin);
    // 12 bytes of 6-bit scales/mins -> bytes 0..7 scales, 8..15 mins (as the 256-bit kernel).
    uint32_t u[4];
    std::memcpy(u, blk->scales, 12);
    u[3] = ((u[2] >> 4) & 0x0f0f0f0f) | (((u[1] >> 6) & 0x03030303) << 4);
    const uint32_t m03 = u[1] & 0x3f3f3f3f;
    u[1] = (u[2] & 0x0f0f0f0f) | (((u[0] >> 6) & 0x03030303) << 4);
    u[2] = m03;
    u[0] &= 0x3f3f3f3f;
    sc16 = _mm512_castsi256_si512(
        _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(u))));
  }
  __m512i weights(int c) const {
    // Both halves hold qs[32c ..]; the high half shifted by 4 gives the high nibbles.
    const __m512i shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    __m512i q = _mm512_and_si512(_mm512_srlv_epi16(bcast256(blk->qs + 32 * c), shift),
                                 _mm512_set1_epi8(0x0F));
    if constexpr (kFive) {
      // Fifth bit: bit 2c (low half) / 2c + 1 (high half) of qh[l].
      const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (2 * c))),
                                             _mm256_set1_epi8(static_cast<char>(2 << (2 * c))), 1);
      const __mmask64 h = _mm512_test_epi8_mask(bcast256(blk->qh), bit);
      q = _mm512_mask_add_epi8(q, h, q, _mm512_set1_epi8(16));
    }
    return q;
  }
  __m512i scales(int c) const { return kScales4K.apply(c, sc16); }
  // Mins m_j in int16 lanes 2j and 2j + 1, to pair with the 16 block sums.
  __m256i mins_pairs() const { return _mm512_castsi512_si256(kMinPairs.apply(0, sc16)); }
  __m256i int_fix(__m256i y, const BlockQ8_K*) const { return y; }
};

// Q6_K: chunk c = quarters 2(c % 2), 2(c % 2) + 1 of 128-group c / 2; scales per 16 elements.
struct Q6KRow {
  static constexpr int kBytes = sizeof(BlockQ6_K);
  static constexpr bool kHasMins = false;
  const BlockQ6_K* blk;
  float d, dmin;
  __m512i sc16;  // the 16 int8 scales as int16

  void prep(const uint8_t* row, int64_t b) {
    blk = reinterpret_cast<const BlockQ6_K*>(row) + b;
    d = half_to_float(blk->d);
    dmin = 0;
    sc16 = _mm512_castsi256_si512(
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->scales))));
  }
  __m512i weights(int c) const {
    const int g = c / 2;
    // Low 4 bits: quarters p and p + 1 are the 64 bytes ql[64g ..], low or high nibbles.
    __m512i lo = _mm512_loadu_si512(blk->ql + 64 * g);
    if (c % 2) lo = _mm512_srli_epi16(lo, 4);
    lo = _mm512_and_si512(lo, _mm512_set1_epi8(0x0F));
    // High 2 bits of quarter p: bits 2p, 2p + 1 of qh[32g + l], moved to bits 4, 5 by a 32-bit
    // rotate (bits that cross into a neighbouring byte land outside 0x30 and are masked off).
    const int p0 = 2 * (c % 2);
    const __m512i rot = _mm512_inserti64x4(_mm512_set1_epi32((4 - 2 * p0) & 31),
                                           _mm256_set1_epi32((2 - 2 * p0) & 31), 1);
    const __m512i hi = _mm512_rolv_epi32(bcast256(blk->qh + 32 * g), rot);
    return _mm512_ternarylogic_epi32(lo, hi, _mm512_set1_epi8(0x30), 0xF8);  // lo | (hi & 0x30)
  }
  __m512i scales(int c) const { return kScales6K.apply(c, sc16); }
  __m256i mins_pairs() const { return _mm256_setzero_si256(); }
  // q is stored + 32: sum (q - 32) x = sum q x - 32 * sum_j sc_j bsum_j.
  __m256i int_fix(__m256i y, const BlockQ8_K* x) const {
    const __m256i off = _mm256_madd_epi16(load256(x->bsums), _mm512_castsi512_si256(sc16));
    return _mm256_sub_epi32(y, _mm256_slli_epi32(off, 5));
  }
};

// Lane t of the result = sum of the 8 int32 lanes of y[t] (t < T <= 8; other lanes 0).
template <int T>
inline __m256i sum_lanes(const __m256i* y) {
  __m256i z[8];
#pragma GCC unroll 8
  for (int t = 0; t < 8; ++t) z[t] = t < T ? y[t] : _mm256_setzero_si256();
  const __m256i q0 =
      _mm256_hadd_epi32(_mm256_hadd_epi32(z[0], z[1]), _mm256_hadd_epi32(z[2], z[3]));
  if constexpr (T <= 4)
    return _mm256_zextsi128_si256(
        _mm_add_epi32(_mm256_castsi256_si128(q0), _mm256_extracti128_si256(q0, 1)));
  const __m256i q1 =
      _mm256_hadd_epi32(_mm256_hadd_epi32(z[4], z[5]), _mm256_hadd_epi32(z[6], z[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(q0, q1, 0x20),
                          _mm256_permute2x128_si256(q0, q1, 0x31));
}

inline const BlockQ8_K* q8k(const uint8_t* xrow, int64_t b) {
  return reinterpret_cast<const BlockQ8_K*>(xrow) + b;
}

// R rows x T tokens. The "#pragma GCC unroll" lines keep acc[][] in registers (see
// matmul_zmm_float_avx512.cpp).
template <class Row, int R, int T>
void kq_tile(const TileArgs& a) {
  static_assert(T <= 8);
  const int64_t nb = a.cols / kQKK;
  __m256 facc[R];  // lane t: the float accumulator of (r, t); for T == 1 facc[0] lane r
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) facc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    if (a.prefetch)
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        for (int i = 0; i < Row::kBytes; i += 64)
          _mm_prefetch(reinterpret_cast<const char*>(a.w + r * a.w_stride + b * Row::kBytes +
                                                     kPrefetchBytes + i),
                       _MM_HINT_T0);
    const BlockQ8_K* xb[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) xb[t] = q8k(a.x + t * a.x_stride, b);
    Row w[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) w[r].prep(a.w + r * a.w_stride, b);
    // Small tiles (decode) would wait on one chain of 4 vpdpwssd per output: they use two
    // accumulators (chunks 0, 1 and 2, 3), added before the epilogue (exact integers).
    constexpr int kSplit = R * T <= 6 ? 2 : 1;
    __m512i acc[kSplit][R][T];
#pragma GCC unroll 8
    for (int h = 0; h < kSplit; ++h)
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) acc[h][r][t] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const int h = c * kSplit / 4;
      __m512i wq[R], sc[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        wq[r] = w[r].weights(c);
        sc[r] = w[r].scales(c);
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m512i x = _mm512_loadu_si512(xb[t]->qs + 64 * c);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
          acc[h][r][t] = _mm512_dpwssd_epi32(acc[h][r][t], _mm512_maddubs_epi16(wq[r], x), sc[r]);
      }
    }
    // Super-block epilogue. Each int32 accumulator folded to 8 lanes (exact), then a float
    // vector over the tile's tokens (one per row) or, in decode (T == 1), over its rows.
    auto fold = [&](int r, int t) {
      const __m512i v =
          kSplit == 2 ? _mm512_add_epi32(acc[0][r][t], acc[kSplit - 1][r][t]) : acc[0][r][t];
      return w[r].int_fix(
          _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1)), xb[t]);
    };
    if constexpr (T == 1) {
      __m256i y[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) y[r] = fold(r, 0);
      const __m256 isum = _mm256_cvtepi32_ps(sum_lanes<R>(y));
      const __m256 dx = _mm256_set1_ps(xb[0]->d);
      auto lanes = [&](auto f) {
        auto v = [&](int r) { return r < R ? f(w[r < R ? r : 0]) : 0.0f; };
        return _mm256_setr_ps(v(0), v(1), v(2), v(3), v(4), v(5), v(6), v(7));
      };
      const __m256 dw = lanes([](const Row& x) { return x.d; });
      facc[0] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), isum, facc[0]);
      if constexpr (Row::kHasMins) {
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
          y[r] = _mm256_madd_epi16(load256(xb[0]->bsums), w[r].mins_pairs());
        const __m256 msum = _mm256_cvtepi32_ps(sum_lanes<R>(y));
        const __m256 dm = lanes([](const Row& x) { return x.dmin; });
        facc[0] = _mm256_fnmadd_ps(_mm256_mul_ps(dm, dx), msum, facc[0]);
      }
    } else {
      // Built in registers: scalar stores reloaded as a vector stall store forwarding.
      auto d_of = [&](int t) { return t < T ? xb[t < T ? t : 0]->d : 0.0f; };
      const __m256 dx =
          _mm256_setr_ps(d_of(0), d_of(1), d_of(2), d_of(3), d_of(4), d_of(5), d_of(6), d_of(7));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        __m256i y[T];
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) y[t] = fold(r, t);
        const __m256 isum = _mm256_cvtepi32_ps(sum_lanes<T>(y));
        facc[r] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(w[r].d), dx), isum, facc[r]);
        if constexpr (Row::kHasMins) {
          const __m256i mp = w[r].mins_pairs();
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) y[t] = _mm256_madd_epi16(load256(xb[t]->bsums), mp);
          const __m256 msum = _mm256_cvtepi32_ps(sum_lanes<T>(y));
          facc[r] = _mm256_fnmadd_ps(_mm256_mul_ps(_mm256_set1_ps(w[r].dmin), dx), msum, facc[r]);
        }
      }
    }
  }
  float o[8];
  if constexpr (T == 1) {
    _mm256_storeu_ps(o, facc[0]);
    for (int r = 0; r < R; ++r) a.out[r] = o[r];
  } else {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      _mm256_storeu_ps(o, facc[r]);
      for (int t = 0; t < T; ++t) a.out[t * a.out_stride + r] = o[t];
    }
  }
}

// Tile shapes: decode (one token) runs up to 6 rows at once, so the epilogue's vector of rows
// is 6 lanes full and each activation chunk is loaded once per 6 rows; prefill runs pairs of
// rows x up to 8 tokens (16 accumulators; 8 tokens fill the epilogue's vectors). Measured on
// the 1024-column bench shapes, 1 thread: 3 x 6 tiles gave GEMV ~24 GB/s but GEMM ~5% below
// 2 x 8 tiles, which in turn lost ~30% of GEMV.
constexpr int kDecodeRows = 6, kPairRows = 2, kTokens = 8;

template <class Row>
void kq_kernel(const TileArgs& a, int n_rows, int n_tok) {
  using Fn = void (*)(const TileArgs&);
  if (n_tok == 1) {
    static constexpr auto decode = []<size_t... I>(std::index_sequence<I...>) {
      return std::array<Fn, kDecodeRows>{&kq_tile<Row, I + 1, 1>...};
    }
    (std::make_index_sequence<kDecodeRows>{});
    decode[n_rows - 1](a);
    return;
  }
  static constexpr auto prefill = []<size_t... I>(std::index_sequence<I...>) {
    return std::array<Fn, kPairRows * kTokens>{&kq_tile<Row, I / kTokens + 1, I % kTokens + 1>...};
  }
  (std::make_index_sequence<kPairRows * kTokens>{});
  for (int r0 = 0; r0 < n_rows; r0 += kPairRows) {
    TileArgs sub = a;
    sub.w = a.w + r0 * a.w_stride;
    sub.out = a.out + r0;
    const int nr = n_rows - r0 < kPairRows ? n_rows - r0 : kPairRows;
    prefill[(nr - 1) * kTokens + (n_tok - 1)](sub);
  }
}

constexpr MatmulKernel kQ4_K{ActFormat::kQ8_K, kq_kernel<KMinsRow<false>>, kDecodeRows, kTokens};
constexpr MatmulKernel kQ5_K{ActFormat::kQ8_K, kq_kernel<KMinsRow<true>>, kDecodeRows, kTokens};
constexpr MatmulKernel kQ6_K{ActFormat::kQ8_K, kq_kernel<Q6KRow>, kDecodeRows, kTokens};

}  // namespace

// 512-bit K-quant kernels; nullptr for other dtypes.
const MatmulKernel* avx512_zmm_kquant_kernel(Dtype w) {
  switch (w) {
    case Dtype::kQ4_K:
      return &kQ4_K;
    case Dtype::kQ5_K:
      return &kQ5_K;
    case Dtype::kQ6_K:
      return &kQ6_K;
    default:
      return nullptr;
  }
}

}  // namespace loom::kernels::cpu
