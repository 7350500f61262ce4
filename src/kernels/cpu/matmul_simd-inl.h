// Shared 256-bit SIMD matmul kernels, included by matmul_avx2.cpp and matmul_avx512.cpp.
// The including file defines, before including this header:
//   LOOM_SIMD_NS                 namespace for this ISA's instantiation
//   __m256i dot_u8s8(u, s)       8 x int32: sums of 4 adjacent u8*s8 products
//   __m256i acc_u8s8_scaled(acc, u, s, sc16)
//                                acc + per int32 lane sum of (u8*s8 pair sums) * int16 sc16
// The two ISAs differ only there (maddubs+madd vs VNNI), and both give the same exact integers.
//
// Batch invariance: a tile of R rows x T tokens runs, for each output, exactly the operations
// of the 1 x 1 tile in the same order; only the interleaving across outputs differs. Float
// accumulation uses explicit FMA intrinsics (never left to compiler contraction).
#include <immintrin.h>

#include <array>
#include <cstring>
#include <utility>

#include "kernels/cpu/matmul_kernels.h"
#include "kernels/quant_blocks.h"

namespace loom::kernels::cpu::LOOM_SIMD_NS {
namespace {

// Local copies of small shared helpers: an external inline function compiled here with wider
// ISA flags could be the copy the linker keeps for baseline callers too.
inline float half_to_float(uint16_t h) {
  return _cvtsh_ss(h);
}
inline void scale_min6(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Fixed-order horizontal sum.
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256i unpack_nibbles(const uint8_t* p) {  // 16 bytes -> low nibbles, then high
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i m = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

// Byte j = 0x10 where bit j of bits is set, else 0.
inline __m256i bits_to_0x10(uint32_t bits) {
  __m256i v = _mm256_set1_epi32(static_cast<int>(bits));
  v = _mm256_shuffle_epi8(v, _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                               0x0101010101010101, 0x0000000000000000));
  const __m256i probe = _mm256_set1_epi64x(0x8040201008040201);
  v = _mm256_cmpeq_epi8(_mm256_and_si256(v, probe), probe);
  return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

// Software prefetch distance along each weight row (as in matmul_zmm_avx512.cpp): decode
// streams every weight once from DRAM and the hardware prefetchers stop at 4 KiB pages.
// The rows of a tile are adjacent, so the tiles' prefetches together cover the stream once.
// 8, 16 and 32 KiB measured alike here (1 thread, 1024x32000 F16/BF16/K-quant GEMV).
constexpr int64_t kPrefetchBytes = 16384;

// Prefetches bytes [off, off + n) of each of R rows, kPrefetchBytes ahead (one line per 64).
template <int R>
inline void prefetch_rows(const TileArgs& a, int64_t off, int n) {
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < n; i += 64)
      _mm_prefetch(reinterpret_cast<const char*>(a.w + r * a.w_stride + off + kPrefetchBytes + i),
                   _MM_HINT_T0);
}

// ---------------------------------------------------------------------------------------------
// The generic tile driver. A kernel K describes one block format:
//   kBlock (elements per block), kBlockBytes (its size), kChunks (32-element chunks per block),
//   W prep(row, b)                 per row and block: scales etc.
//   C unpack(const W&, row, b, c)  the chunk's weights in registers
//   X load_x(xrow, cols, b, c)     the chunk's activations
//   S (per output, per block state), Acc (per output, whole row)
//   step(S&, W, C, X, c), end_block(Acc&, S, W, xrow, cols, b), float finish(Acc)

template <class K, int R, int T>
void tile_rt(const TileArgs& a) {
  typename K::Acc acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = K::zero_acc();
  const int64_t nb = a.cols / K::kBlock;
  for (int64_t b = 0; b < nb; ++b) {
    if (a.prefetch) prefetch_rows<R>(a, b * K::kBlockBytes, K::kBlockBytes);
    typename K::W w[R];
    for (int r = 0; r < R; ++r) w[r] = K::prep(a.w + r * a.w_stride, b);
    typename K::S s[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) s[r][t] = K::zero_s();
    for (int c = 0; c < K::kChunks; ++c) {
      typename K::C wc[R];
      for (int r = 0; r < R; ++r) wc[r] = K::unpack(w[r], a.w + r * a.w_stride, b, c);
      for (int t = 0; t < T; ++t) {
        const typename K::X xc = K::load_x(a.x + t * a.x_stride, a.cols, b, c);
        for (int r = 0; r < R; ++r) K::step(s[r][t], w[r], wc[r], xc, c);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t)
        K::end_block(acc[r][t], s[r][t], w[r], a.x + t * a.x_stride, a.cols, b);
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) a.out[t * a.out_stride + r] = K::finish(acc[r][t]);
}

template <class K, int R, int T>
void tile_dispatch(const TileArgs& a, int n_rows, int n_tok) {
  using Fn = void (*)(const TileArgs&);
  static constexpr auto table = []<size_t... I>(std::index_sequence<I...>) {
    return std::array<Fn, R * T>{&tile_rt<K, I / T + 1, I % T + 1>...};
  }
  (std::make_index_sequence<R * T>{});
  table[(n_rows - 1) * T + (n_tok - 1)](a);
}

// ---------------------------------------------------------------------------------------------
// Legacy 32-blocks against kQ8_32 activations.

struct X32 {
  __m256i q;
  float d;
  float s;
};
inline X32 load_x32(const uint8_t* xrow, int64_t cols, int64_t b) {
  // kQ8_32 row: qs[cols] | d[cols / 32] | s[cols / 32] (see act_quant.h).
  const float* d = reinterpret_cast<const float*>(xrow + cols);
  return {_mm256_load_si256(reinterpret_cast<const __m256i*>(xrow + 32 * b)), d[b],
          d[cols / 32 + b]};
}

struct VecAcc {
  __m256 v;
  float m;  // min terms (Q4_1/Q5_1)
};

// Signed weights (Q8_0, Q4_0, Q5_0): |w| as u8 against x with w's sign.
struct SignedW {
  __m256i q;
  __m256i u;
  float d;
};

template <class Unpack>
struct Signed32 {
  static constexpr int kBlock = 32, kChunks = 1, kBlockBytes = Unpack::kBytes;
  using W = SignedW;
  using C = int;
  using X = X32;
  using S = int;
  using Acc = VecAcc;
  static Acc zero_acc() { return {_mm256_setzero_ps(), 0.0f}; }
  static S zero_s() { return 0; }
  static W prep(const uint8_t* row, int64_t b) {
    W w;
    w.q = Unpack::q(row, b, &w.d);
    w.u = _mm256_abs_epi8(w.q);
    return w;
  }
  static C unpack(const W&, const uint8_t*, int64_t, int) { return 0; }
  static X load_x(const uint8_t* xrow, int64_t cols, int64_t b, int) {
    return load_x32(xrow, cols, b);
  }
  static void step(S&, const W&, const C&, const X&, int) {}
  static void end_block(Acc& acc, const S&, const W& w, const uint8_t* xrow, int64_t cols,
                        int64_t b) {
    const X x = load_x32(xrow, cols, b);
    const __m256i p = dot_u8s8(w.u, _mm256_sign_epi8(x.q, w.q));
    acc.v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(w.d * x.d), acc.v);
  }
  static float finish(const Acc& acc) { return hsum(acc.v); }
};

struct UnpackQ8_0 {
  static constexpr int kBytes = sizeof(BlockQ8_0);
  static __m256i q(const uint8_t* row, int64_t b, float* d) {
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + b;
    *d = half_to_float(blk->d);
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs));
  }
};
struct UnpackQ4_0 {
  static constexpr int kBytes = sizeof(BlockQ4_0);
  static __m256i q(const uint8_t* row, int64_t b, float* d) {
    const auto* blk = reinterpret_cast<const BlockQ4_0*>(row) + b;
    *d = half_to_float(blk->d);
    return _mm256_sub_epi8(unpack_nibbles(blk->qs), _mm256_set1_epi8(8));
  }
};
// MXFP4: the nibbles index the doubled E2M1 table (integers in [-12, 12]) with one byte
// shuffle; the block scale is 2^(e-128).
struct UnpackMxfp4 {
  static constexpr int kBytes = sizeof(BlockMxfp4);
  static __m256i q(const uint8_t* row, int64_t b, float* d) {
    const auto* blk = reinterpret_cast<const BlockMxfp4*>(row) + b;
    *d = e8m0_half(blk->e);
    const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Values));
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(table), unpack_nibbles(blk->qs));
  }
};
// IQ4_NL / IQ4_XS: the nibbles index the format's int8 grid with one byte shuffle.
inline __m256i iq4_grid_values(const uint8_t* qs) {
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlValues));
  return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(table), unpack_nibbles(qs));
}
struct UnpackIq4Nl {
  static constexpr int kBytes = sizeof(BlockIq4Nl);
  static __m256i q(const uint8_t* row, int64_t b, float* d) {
    const auto* blk = reinterpret_cast<const BlockIq4Nl*>(row) + b;
    *d = half_to_float(blk->d);
    return iq4_grid_values(blk->qs);
  }
};
// IQ4_XS as 32-column blocks: block b is sub-block b % 8 of super-block b / 8, scaled by
// d * (ls - 32); 17 bytes per block on average, as the row prefetch counts them.
struct UnpackIq4Xs {
  static constexpr int kBytes = sizeof(BlockIq4Xs) / 8;
  static __m256i q(const uint8_t* row, int64_t b, float* d) {
    const auto* blk = reinterpret_cast<const BlockIq4Xs*>(row) + b / 8;
    *d = half_to_float(blk->d) * static_cast<float>(iq4_xs_scale(*blk, static_cast<int>(b % 8)));
    return iq4_grid_values(blk->qs + 16 * (b % 8));
  }
};
struct UnpackQ5_0 {
  static constexpr int kBytes = sizeof(BlockQ5_0);
  static __m256i q(const uint8_t* row, int64_t b, float* d) {
    const auto* blk = reinterpret_cast<const BlockQ5_0*>(row) + b;
    *d = half_to_float(blk->d);
    uint32_t qh;
    std::memcpy(&qh, blk->qh, 4);
    const __m256i q = _mm256_or_si256(unpack_nibbles(blk->qs), bits_to_0x10(qh));
    return _mm256_sub_epi8(q, _mm256_set1_epi8(16));
  }
};

// Unsigned weights with a min (Q4_1, Q5_1): value = d * q + m.
struct MinW {
  __m256i q;
  float d, m;
};
template <class Unpack>
struct Min32 {
  static constexpr int kBlock = 32, kChunks = 1, kBlockBytes = Unpack::kBytes;
  using W = MinW;
  using C = int;
  using X = X32;
  using S = int;
  using Acc = VecAcc;
  static Acc zero_acc() { return {_mm256_setzero_ps(), 0.0f}; }
  static S zero_s() { return 0; }
  static W prep(const uint8_t* row, int64_t b) {
    W w;
    w.q = Unpack::q(row, b, &w.d, &w.m);
    return w;
  }
  static C unpack(const W&, const uint8_t*, int64_t, int) { return 0; }
  static X load_x(const uint8_t* xrow, int64_t cols, int64_t b, int) {
    return load_x32(xrow, cols, b);
  }
  static void step(S&, const W&, const C&, const X&, int) {}
  static void end_block(Acc& acc, const S&, const W& w, const uint8_t* xrow, int64_t cols,
                        int64_t b) {
    const X x = load_x32(xrow, cols, b);
    const __m256i p = dot_u8s8(w.q, x.q);
    acc.v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(w.d * x.d), acc.v);
    acc.m = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(w.m), _mm_set_ss(x.s), _mm_set_ss(acc.m)));
  }
  static float finish(const Acc& acc) { return hsum(acc.v) + acc.m; }
};

struct UnpackQ4_1 {
  static constexpr int kBytes = sizeof(BlockQ4_1);
  static __m256i q(const uint8_t* row, int64_t b, float* d, float* m) {
    const auto* blk = reinterpret_cast<const BlockQ4_1*>(row) + b;
    *d = half_to_float(blk->d);
    *m = half_to_float(blk->m);
    return unpack_nibbles(blk->qs);
  }
};
struct UnpackQ5_1 {
  static constexpr int kBytes = sizeof(BlockQ5_1);
  static __m256i q(const uint8_t* row, int64_t b, float* d, float* m) {
    const auto* blk = reinterpret_cast<const BlockQ5_1*>(row) + b;
    *d = half_to_float(blk->d);
    *m = half_to_float(blk->m);
    uint32_t qh;
    std::memcpy(&qh, blk->qh, 4);
    return _mm256_or_si256(unpack_nibbles(blk->qs), bits_to_0x10(qh));
  }
};

// ---------------------------------------------------------------------------------------------
// K-quants against Q8_K activations: exact integer sums per super-block (scales applied in
// integer, lanes reduced exactly), then the same two scalar FMAs per super-block as the generic
// kernels in matmul_scalar.cpp, so K-quant results are bit-identical on every ISA.

inline const BlockQ8_K* q8k(const uint8_t* xrow, int64_t b) {
  return reinterpret_cast<const BlockQ8_K*>(xrow) + b;
}
inline __m256i load32(const void* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

struct KAcc {
  float v;
};

// (sum of a's lanes, sum of b's lanes), exact.
inline void reduce2(__m256i a, __m256i b, int32_t* sa, int32_t* sb) {
  const __m256i h = _mm256_hadd_epi32(a, b);  // a01 a23 b01 b23 | a45 a67 b45 b67
  __m128i x = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
  x = _mm_hadd_epi32(x, x);
  *sa = _mm_cvtsi128_si32(x);
  *sb = _mm_extract_epi32(x, 1);
}

inline float fma1(float a, float b, float c) {
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}
struct KX {
  __m256i lo, hi;  // 64 activations: chunk c covers elements 64c .. 64c+63
};
// Chunk c of super-block b of a Q8_K activation row: every K-quant policy's load_x.
inline KX load_kx(const uint8_t* xrow, int64_t b, int c) {
  const int8_t* q = q8k(xrow, b)->qs + 64 * c;
  return {load32(q), load32(q + 32)};
}

// Q4_K / Q5_K: chunk c = 64 elements = sub-blocks 2c (low nibbles) and 2c+1 (high nibbles).
struct KWMins {
  const uint8_t* blk;
  float d, dmin;
  __m256i sc16;    // the 8 scales as int16 in lanes 0..7 of both 128-bit halves
  __m256i mins16;  // m_j in int16 lanes 2j and 2j+1 (pairs with Q8_K bsums)
  __m256i qh;      // Q5_K only
};

// Unpacks the 12-byte 6-bit scales/mins with 32-bit masks: bytes 0..7 = scales, 8..15 = mins.
inline void prep_mins(KWMins& w, const uint8_t* scales) {
  uint32_t u[4];
  std::memcpy(u, scales, 12);
  u[3] = ((u[2] >> 4) & 0x0f0f0f0f) | (((u[1] >> 6) & 0x03030303) << 4);
  const uint32_t m03 = u[1] & 0x3f3f3f3f;
  u[1] = (u[2] & 0x0f0f0f0f) | (((u[0] >> 6) & 0x03030303) << 4);
  u[2] = m03;
  u[0] &= 0x3f3f3f3f;
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(u));
  w.sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(v));
  const __m128i dup =
      _mm_shuffle_epi8(v, _mm_set_epi8(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8));
  w.mins16 = _mm256_cvtepu8_epi16(dup);
}

// int16 scale j of sc16 broadcast to all 16 lanes.
inline __m256i bcast_scale(__m256i sc16, int j) {
  return _mm256_shuffle_epi8(sc16, _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * j)));
}

template <bool kFive>
struct KMins {
  static constexpr int kBlock = 256, kChunks = 4;
  static constexpr int kBlockBytes = kFive ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
  using W = KWMins;
  struct C {
    __m256i lo, hi;
  };
  using X = KX;
  using S = __m256i;
  using Acc = KAcc;
  static Acc zero_acc() { return {0.0f}; }
  static S zero_s() { return _mm256_setzero_si256(); }
  static W prep(const uint8_t* row, int64_t b) {
    W w;
    if constexpr (kFive) {
      const auto* blk = reinterpret_cast<const BlockQ5_K*>(row) + b;
      w.blk = blk->qs;
      w.d = half_to_float(blk->d);
      w.dmin = half_to_float(blk->dmin);
      prep_mins(w, blk->scales);
      w.qh = load32(blk->qh);
    } else {
      const auto* blk = reinterpret_cast<const BlockQ4_K*>(row) + b;
      w.blk = blk->qs;
      w.d = half_to_float(blk->d);
      w.dmin = half_to_float(blk->dmin);
      prep_mins(w, blk->scales);
    }
    return w;
  }
  static C unpack(const W& w, const uint8_t*, int64_t, int c) {
    const __m256i v = load32(w.blk + 32 * c);
    const __m256i m = _mm256_set1_epi8(0x0F);
    C out{_mm256_and_si256(v, m), _mm256_and_si256(_mm256_srli_epi16(v, 4), m)};
    if constexpr (kFive) {
      const __m256i one = _mm256_set1_epi8(1);
      const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(w.qh, 2 * c), one);
      const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(w.qh, 2 * c + 1), one);
      out.lo = _mm256_or_si256(out.lo, _mm256_slli_epi16(h0, 4));
      out.hi = _mm256_or_si256(out.hi, _mm256_slli_epi16(h1, 4));
    }
    return out;
  }
  static X load_x(const uint8_t* xrow, int64_t, int64_t b, int c) { return load_kx(xrow, b, c); }
  static void step(S& s, const W& w, const C& wc, const X& x, int c) {
    s = acc_u8s8_scaled(s, wc.lo, x.lo, bcast_scale(w.sc16, 2 * c));
    s = acc_u8s8_scaled(s, wc.hi, x.hi, bcast_scale(w.sc16, 2 * c + 1));
  }
  static void end_block(Acc& acc, const S& s, const W& w, const uint8_t* xrow, int64_t, int64_t b) {
    const BlockQ8_K* x = q8k(xrow, b);
    int32_t isum, msum;
    reduce2(s, _mm256_madd_epi16(load32(x->bsums), w.mins16), &isum, &msum);
    acc.v = fma1(w.d * x->d, static_cast<float>(isum), acc.v);
    acc.v = fma1(-(w.dmin * x->d), static_cast<float>(msum), acc.v);
  }
  static float finish(const Acc& acc) { return acc.v; }
};

// Q6_K: chunk c = 64 elements; group g = c/2 (128 elements), q in 0..63 (offset 32 applied
// through the Q8_K block sums).
struct KW6 {
  const BlockQ6_K* blk;
  float d;
  __m256i sc16;  // scales as int16 (for the offset term against bsums)
};
struct Q6K {
  static constexpr int kBlock = 256, kChunks = 4, kBlockBytes = sizeof(BlockQ6_K);
  using W = KW6;
  struct C {
    __m256i lo, hi;  // elements 64c .. +31 and 64c+32 .. +63
  };
  using X = KX;
  using S = __m256i;
  using Acc = KAcc;
  static Acc zero_acc() { return {0.0f}; }
  static S zero_s() { return _mm256_setzero_si256(); }
  static W prep(const uint8_t* row, int64_t b) {
    W w;
    w.blk = reinterpret_cast<const BlockQ6_K*>(row) + b;
    w.d = half_to_float(w.blk->d);
    w.sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.blk->scales)));
    return w;
  }
  static C unpack(const W& w, const uint8_t*, int64_t, int c) {
    // Within group g: quarter p (32 elements) = nibble (p / 2) of ql[64g + 32 (p % 2) + l]
    // with high bits (qh[32g + l] >> 2p) & 3. Chunk c holds quarters 2(c%2), 2(c%2)+1.
    const int g = c / 2, p0 = 2 * (c % 2);
    const uint8_t* ql = w.blk->ql + 64 * g;
    const __m256i qh = load32(w.blk->qh + 32 * g);
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
    auto quarter = [&](int p) {
      __m256i lo = load32(ql + 32 * (p % 2));
      lo = p < 2 ? _mm256_and_si256(lo, m4) : _mm256_and_si256(_mm256_srli_epi16(lo, 4), m4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * p), m2);
      return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
    };
    return {quarter(p0), quarter(p0 + 1)};
  }
  static X load_x(const uint8_t* xrow, int64_t, int64_t b, int c) { return load_kx(xrow, b, c); }
  static __m256i scale_pair(const W& w, int j) {  // sub-blocks j, j+1 (j even) -> int16 halves
    const __m256i pair = _mm256_permutevar8x32_epi32(w.sc16, _mm256_set1_epi32(j / 2));
    return _mm256_shuffle_epi8(pair, _mm256_set_epi64x(0x0302030203020302, 0x0302030203020302,
                                                       0x0100010001000100, 0x0100010001000100));
  }
  static void step(S& s, const W& w, const C& wc, const X& x, int c) {
    s = acc_u8s8_scaled(s, wc.lo, x.lo, scale_pair(w, 4 * c));
    s = acc_u8s8_scaled(s, wc.hi, x.hi, scale_pair(w, 4 * c + 2));
  }
  static void end_block(Acc& acc, const S& s, const W& w, const uint8_t* xrow, int64_t, int64_t b) {
    const BlockQ8_K* x = q8k(xrow, b);
    // sum (q - 32) x = sum q x - 32 sum x, per sub-block scale.
    const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(load32(x->bsums), w.sc16), 5);
    int32_t isum, unused;
    reduce2(_mm256_sub_epi32(s, off), _mm256_setzero_si256(), &isum, &unused);
    acc.v = fma1(w.d * x->d, static_cast<float>(isum), acc.v);
  }
  static float finish(const Acc& acc) { return acc.v; }
};

// Q2_K / Q3_K: 16 sub-blocks of 16 with 2-bit q in the same places: 32-element part k (0..7)
// is bits 2 (k % 4) of qs[32 (k / 4) + l], l < 32; Q3_K adds bit k of hmask[l] as bit 2, so
// q in 0..7 with the offset 4 taken off through the Q8_K block sums, as Q6_K's 32. Q2_K's
// 4-bit mins pair with the block sums as Q4_K's do. Chunk c = parts 2c, 2c+1.
struct KWLow {
  const uint8_t* qs;
  float d, dmin;
  __m256i sc_eo;   // the 16 scales as int16: even sub-blocks' in the low half, odd in the high
  __m256i sc16;    // Q3_K: the 16 scales as int16 in order (for the offset term against bsums)
  __m256i mins16;  // Q2_K: the 16 mins as int16
  __m256i hmask;   // Q3_K
};

// Unpacks the 12-byte 6-bit scales of Q3_K with 32-bit masks (what q3k_scales does per byte):
// 16 int8 scales, minus 32.
inline __m128i q3k_scales8(const uint8_t* scales) {
  uint32_t u[4];
  std::memcpy(u, scales, 12);
  const uint32_t m4 = 0x0f0f0f0f, m2 = 0x03030303, hi = u[2];
  u[2] = ((u[0] >> 4) & m4) | (((hi >> 4) & m2) << 4);
  u[3] = ((u[1] >> 4) & m4) | (((hi >> 6) & m2) << 4);
  u[0] = (u[0] & m4) | ((hi & m2) << 4);
  u[1] = (u[1] & m4) | (((hi >> 2) & m2) << 4);
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(u));
  return _mm_sub_epi8(v, _mm_set1_epi8(32));
}

// 16 int8 scales -> int16, even-indexed ones in the low 128-bit half and odd in the high, so
// that the scales of sub-blocks 2m, 2m+1 (one 32-element part) are one in-lane broadcast.
inline __m256i even_odd16(__m128i sc8) {
  const __m128i eo =
      _mm_shuffle_epi8(sc8, _mm_set_epi8(15, 13, 11, 9, 7, 5, 3, 1, 14, 12, 10, 8, 6, 4, 2, 0));
  return _mm256_cvtepi8_epi16(eo);
}

template <bool kThree>
struct KLow {
  static constexpr int kBlock = 256, kChunks = 4;
  static constexpr int kBlockBytes = kThree ? sizeof(BlockQ3_K) : sizeof(BlockQ2_K);
  using W = KWLow;
  struct C {
    __m256i lo, hi;  // elements 64c .. +31 and 64c+32 .. +63
  };
  using X = KX;
  using S = __m256i;
  using Acc = KAcc;
  static Acc zero_acc() { return {0.0f}; }
  static S zero_s() { return _mm256_setzero_si256(); }
  static W prep(const uint8_t* row, int64_t b) {
    W w;
    if constexpr (kThree) {
      const auto* blk = reinterpret_cast<const BlockQ3_K*>(row) + b;
      w.qs = blk->qs;
      w.d = half_to_float(blk->d);
      const __m128i sc8 = q3k_scales8(blk->scales);
      w.sc_eo = even_odd16(sc8);
      w.sc16 = _mm256_cvtepi8_epi16(sc8);
      w.hmask = load32(blk->hmask);
    } else {
      const auto* blk = reinterpret_cast<const BlockQ2_K*>(row) + b;
      w.qs = blk->qs;
      w.d = half_to_float(blk->d);
      w.dmin = half_to_float(blk->dmin);
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->scales));
      const __m128i m = _mm_set1_epi8(0x0F);
      w.sc_eo = even_odd16(_mm_and_si128(v, m));  // 0..15: the sign extension is harmless
      w.mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(v, 4), m));
    }
    return w;
  }
  static C unpack(const W& w, const uint8_t*, int64_t, int c) {
    const __m256i v = load32(w.qs + 32 * (c / 2));
    const __m256i m = _mm256_set1_epi8(3);
    const int k = 2 * c;  // parts k, k + 1
    C out{_mm256_and_si256(_mm256_srli_epi16(v, 2 * (k % 4)), m),
          _mm256_and_si256(_mm256_srli_epi16(v, 2 * (k % 4) + 2), m)};
    if constexpr (kThree) {
      // Bit j of each hmask byte moved to bit 2 (shifts stay within each byte's bits 0..7).
      const auto hbit = [&](int j) {
        const __m256i h =
            j >= 2 ? _mm256_srli_epi16(w.hmask, j - 2) : _mm256_slli_epi16(w.hmask, 2 - j);
        return _mm256_and_si256(h, _mm256_set1_epi8(4));
      };
      out.lo = _mm256_or_si256(out.lo, hbit(k));
      out.hi = _mm256_or_si256(out.hi, hbit(k + 1));
    }
    return out;
  }
  static X load_x(const uint8_t* xrow, int64_t, int64_t b, int c) { return load_kx(xrow, b, c); }
  static void step(S& s, const W& w, const C& wc, const X& x, int c) {
    s = acc_u8s8_scaled(s, wc.lo, x.lo, bcast_scale(w.sc_eo, 2 * c));
    s = acc_u8s8_scaled(s, wc.hi, x.hi, bcast_scale(w.sc_eo, 2 * c + 1));
  }
  static void end_block(Acc& acc, const S& s, const W& w, const uint8_t* xrow, int64_t, int64_t b) {
    const BlockQ8_K* x = q8k(xrow, b);
    int32_t isum, msum;
    if constexpr (kThree) {
      // sum (q - 4) x = sum q x - 4 sum x, per sub-block scale.
      const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(load32(x->bsums), w.sc16), 2);
      reduce2(_mm256_sub_epi32(s, off), _mm256_setzero_si256(), &isum, &msum);
      acc.v = fma1(w.d * x->d, static_cast<float>(isum), acc.v);
    } else {
      reduce2(s, _mm256_madd_epi16(load32(x->bsums), w.mins16), &isum, &msum);
      acc.v = fma1(w.d * x->d, static_cast<float>(isum), acc.v);
      acc.v = fma1(-(w.dmin * x->d), static_cast<float>(msum), acc.v);
    }
  }
  static float finish(const Acc& acc) { return acc.v; }
};

// ---------------------------------------------------------------------------------------------
// Float weights (F32, F16, BF16) against float activations, 8 columns per step. The tail
// (cols % 8) is accumulated separately with scalar FMAs.

template <class Load, int R, int T>
void float_tile_rt(const TileArgs& a) {
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  const int64_t n8 = a.cols & ~int64_t{7};
  for (int64_t k = 0; k < n8; k += 8) {
    // One line per row every 64 bytes of weights.
    if (a.prefetch && (k * Load::kBytes) % 64 == 0) prefetch_rows<R>(a, k * Load::kBytes, 64);
    __m256 w[R];
    for (int r = 0; r < R; ++r) w[r] = Load::load8(a.w + r * a.w_stride, k);
    for (int t = 0; t < T; ++t) {
      const __m256 x = _mm256_loadu_ps(reinterpret_cast<const float*>(a.x + t * a.x_stride) + k);
      for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(w[r], x, acc[r][t]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) {
      float s = hsum(acc[r][t]);
      const float* x = reinterpret_cast<const float*>(a.x + t * a.x_stride);
      for (int64_t k = n8; k < a.cols; ++k)
        s = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(Load::load1(a.w + r * a.w_stride, k)),
                                       _mm_set_ss(x[k]), _mm_set_ss(s)));
      a.out[t * a.out_stride + r] = s;
    }
}

template <class Load, int R, int T>
void float_tile_dispatch(const TileArgs& a, int n_rows, int n_tok) {
  using Fn = void (*)(const TileArgs&);
  static constexpr auto table = []<size_t... I>(std::index_sequence<I...>) {
    return std::array<Fn, R * T>{&float_tile_rt<Load, I / T + 1, I % T + 1>...};
  }
  (std::make_index_sequence<R * T>{});
  table[(n_rows - 1) * T + (n_tok - 1)](a);
}

struct LoadF32 {
  static constexpr int kBytes = 4;
  static __m256 load8(const uint8_t* row, int64_t k) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + k);
  }
  static float load1(const uint8_t* row, int64_t k) {
    return reinterpret_cast<const float*>(row)[k];
  }
};
struct LoadF16 {
  static constexpr int kBytes = 2;
  static __m256 load8(const uint8_t* row, int64_t k) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k)));
  }
  static float load1(const uint8_t* row, int64_t k) {
    uint16_t h;
    std::memcpy(&h, row + 2 * k, 2);
    return half_to_float(h);
  }
};
struct LoadBF16 {
  static constexpr int kBytes = 2;
  static __m256 load8(const uint8_t* row, int64_t k) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static float load1(const uint8_t* row, int64_t k) {
    uint16_t h;
    std::memcpy(&h, row + 2 * k, 2);
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

}  // namespace
}  // namespace loom::kernels::cpu::LOOM_SIMD_NS
