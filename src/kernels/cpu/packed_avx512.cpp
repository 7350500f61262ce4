// AVX-512 kernels for kRows16-packed Q8_0 / Q4_0 / MXFP4 / IQ4_NL / IQ4_XS (VNNI) and F16 / BF16
// matrices (layout in kernels/packed.h); Q2_K / Q3_K, Q4_K / Q5_K and Q6_K have files of their
// own.
//
// Weights are unsigned (Q8_0 stored as q + 128, Q4_0 nibbles 0..15 standing for q - 8, MXFP4
// nibbles mapped by a byte shuffle to doubled E2M1 + 12) and the activations signed int8, so
// vpdpbusd(w, x) = sum (q + c) x = sum q x + c * sum x with c = 128, 8 or 12: each block's
// int32 accumulator starts at -c * sum(x), which the activation row carries per block, and then
// holds the exact integer dot of the block for each of the 16 rows in its own lane. Per block and
// token: lane * (d_w * d_x) FMA'd into a float lane per row, blocks in order. Nothing depends on
// the tile's token count or where a row sits, so a token's result is the same alone or in any
// batch.
#include <immintrin.h>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/packed_kernels.h"
#include "kernels/cpu/packed_tile_util.h"
#include "kernels/packed.h"

namespace loom::kernels::cpu {
namespace {

// The 32-column block formats: their records are scales then 8 (Q8_0) or 4 (nibbles) steps.
enum class Block32 { kQ8_0, kQ4_0, kMxfp4, kIq4Nl };

// 16 E8M0 exponents (one per row) as 2^(e - 128), exactly e8m0_half's value: (e - 1) << 23 is
// that float from e = 2 on; e = 0 and 1 give the subnormals 2^-128 and 2^-127.
inline __m512 e8m0_half_ps(const uint8_t* p) {
  const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
  const __m512i subnormal = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
  const __mmask16 small = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
  return _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, normal, subnormal));
}

// kMxfp4Values + 12 (0..24) in each 128-bit lane, for vpshufb by nibble.
inline __m512i mxfp4_offset_table() {
  alignas(16) static constexpr uint8_t kTable[16] = {12, 13, 14, 15, 16, 18, 20, 24,
                                                     12, 11, 10, 9,  8,  6,  4,  0};
  return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kTable)));
}

// kIq4NlValues + 128 (1..241) in each 128-bit lane, for vpshufb by nibble: the IQ4 formats'
// dots then start at -128 * sum(x), as Q8_0's.
inline __m512i iq4_offset_table() {
  alignas(16) static constexpr uint8_t kTable[16] = {1,   24,  45,  63,  79,  93,  106, 118,
                                                     129, 141, 153, 166, 181, 197, 217, 241};
  return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kTable)));
}

template <Block32 F, int G, int T>
void tile(const PackedArgs& a) {
  constexpr bool kQ8 = F == Block32::kQ8_0, kMx = F == Block32::kMxfp4, kNl = F == Block32::kIq4Nl;
  constexpr int kScaleBytes = kMx ? kPackRows : kPackRows * 2;
  constexpr int kRec = kScaleBytes + (kQ8 ? 8 : 4) * 64;
  const int64_t nb = a.cols / 32;
  const int8_t* xq[T];
  const float* xd[T];
  const int32_t* start[T];  // -c * sum(x) per block, c = 128, 8 or 12
  for (int t = 0; t < T; ++t) {
    const PackedActRow row(a.x + t * a.x_stride, a.cols);
    xq[t] = row.q;
    xd[t] = row.d;
    start[t] = kQ8 || kNl ? row.start_q8_0 : kMx ? row.start_mxfp4 : row.start_q4_0;
  }
  __m512 acc[G][T];
  for (int g = 0; g < G; ++g)
    for (int t = 0; t < T; ++t) acc[g][t] = _mm512_setzero_ps();
  const __m512i nib = _mm512_set1_epi8(0x0F);
  [[maybe_unused]] const __m512i table = kMx   ? mxfp4_offset_table()
                                         : kNl ? iq4_offset_table()
                                               : __m512i{};
  const RecordPrefetch<kRec> prefetch(a);
  // A tile that prefetches whole records (decode, a verify step's one tile) spreads them over
  // the block's steps: one token's Q8_0 GEMV from DRAM 30-31 -> 34-35.5 GB/s, llama-0.5b tg64
  // +8-11%. Six-token tiles keep the record's prefetch at its start: with the branch in their
  // step loop, x16 measured 15-27% slower.
  const bool spread = T <= 5 && prefetch.whole();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* rec[G];
    __m512 dw[G];
    for (int g = 0; g < G; ++g) {
      rec[g] = a.w + (g * nb + b) * kRec;
      if constexpr (kMx)
        dw[g] = e8m0_half_ps(rec[g]);
      else
        dw[g] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec[g])));
    }
    if (!spread) prefetch(rec);
    __m512i dot[G][T];
    for (int t = 0; t < T; ++t) {
      const __m512i init = _mm512_set1_epi32(start[t][b]);
      for (int g = 0; g < G; ++g) dot[g][t] = init;
    }
    if constexpr (kQ8) {
      for (int k = 0; k < 8; ++k) {
        if (spread) prefetch.template whole_part<G, 8>(rec, k);
        __m512i w[G];
        for (int g = 0; g < G; ++g) w[g] = _mm512_loadu_si512(rec[g] + kScaleBytes + 64 * k);
        for (int t = 0; t < T; ++t) {
          const __m512i x = bcast4(xq[t] + 32 * b + 4 * k);
          for (int g = 0; g < G; ++g) dot[g][t] = _mm512_dpbusd_epi32(dot[g][t], w[g], x);
        }
      }
    } else {
      for (int k = 0; k < 4; ++k) {
        if (spread) prefetch.template whole_part<G, 4>(rec, k);
        __m512i lo[G], hi[G];
        for (int g = 0; g < G; ++g) {
          const __m512i v = _mm512_loadu_si512(rec[g] + kScaleBytes + 64 * k);
          lo[g] = _mm512_and_si512(v, nib);
          hi[g] = _mm512_and_si512(_mm512_srli_epi16(v, 4), nib);
          if constexpr (kMx || kNl) {
            lo[g] = _mm512_shuffle_epi8(table, lo[g]);
            hi[g] = _mm512_shuffle_epi8(table, hi[g]);
          }
        }
        for (int t = 0; t < T; ++t) {
          const __m512i xl = bcast4(xq[t] + 32 * b + 4 * k),
                        xh = bcast4(xq[t] + 32 * b + 16 + 4 * k);
          for (int g = 0; g < G; ++g) {
            dot[g][t] = _mm512_dpbusd_epi32(dot[g][t], lo[g], xl);
            dot[g][t] = _mm512_dpbusd_epi32(dot[g][t], hi[g], xh);
          }
        }
      }
    }
    for (int t = 0; t < T; ++t) {
      const __m512 dx = _mm512_set1_ps(xd[t][b]);
      for (int g = 0; g < G; ++g)
        acc[g][t] =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[g][t]), _mm512_mul_ps(dw[g], dx), acc[g][t]);
    }
  }
  for (int t = 0; t < T; ++t) {
    __m512 rows[G];
    for (int g = 0; g < G; ++g) rows[g] = acc[g][t];
    store_rows(a, t, rows);
  }
}

// IQ4_XS: per 256-column record, sub-block j's 16 row scales d * (ls - 32) as floats, then
// exactly the IQ4_NL tile's block: the dot of u8 grid value + 128 with the int8 activations
// starting at -128 * sum(x), scaled by the sub-block's scale times d_x, blocks in order.
template <int G, int T>
void tile_iq4_xs(const PackedArgs& a) {
  constexpr int kRec = kPackedIq4XsBytes;
  const int64_t nsb = a.cols / 256;
  const int8_t* xq[T];
  const float* xd[T];
  const int32_t* start[T];
  for (int t = 0; t < T; ++t) {
    const PackedActRow row(a.x + t * a.x_stride, a.cols);
    xq[t] = row.q;
    xd[t] = row.d;
    start[t] = row.start_q8_0;
  }
  const RecordPrefetch<kRec> prefetch(a);
  const __m512i nib = _mm512_set1_epi8(0x0F), table = iq4_offset_table();
  __m512 acc[G][T];
  for (int g = 0; g < G; ++g)
    for (int t = 0; t < T; ++t) acc[g][t] = _mm512_setzero_ps();
  for (int64_t s = 0; s < nsb; ++s) {
    const uint8_t* rec[G];
    __m512 d[G];
    for (int g = 0; g < G; ++g) {
      rec[g] = a.w + (g * nsb + s) * kRec;
      d[g] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec[g])));
    }
    for (int j = 0; j < 8; ++j) {
      prefetch.template part<G, 8>(rec, j);
      const int64_t blk = 8 * s + j;  // 32-column block of the activations
      __m512 scale[G];
      for (int g = 0; g < G; ++g) {
        const __m128i ls = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rec[g] + 32 + 16 * j));
        scale[g] = _mm512_mul_ps(d[g], _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(ls)));
      }
      __m512i dot[G][T];
      for (int t = 0; t < T; ++t) {
        const __m512i init = _mm512_set1_epi32(start[t][blk]);
        for (int g = 0; g < G; ++g) dot[g][t] = init;
      }
      for (int k = 0; k < 4; ++k) {
        __m512i lo[G], hi[G];
        for (int g = 0; g < G; ++g) {
          const __m512i v = _mm512_loadu_si512(rec[g] + 160 + 256 * j + 64 * k);
          lo[g] = _mm512_shuffle_epi8(table, _mm512_and_si512(v, nib));
          hi[g] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(v, 4), nib));
        }
        for (int t = 0; t < T; ++t) {
          const __m512i xl = bcast4(xq[t] + 32 * blk + 4 * k),
                        xh = bcast4(xq[t] + 32 * blk + 16 + 4 * k);
          for (int g = 0; g < G; ++g) {
            dot[g][t] = _mm512_dpbusd_epi32(dot[g][t], lo[g], xl);
            dot[g][t] = _mm512_dpbusd_epi32(dot[g][t], hi[g], xh);
          }
        }
      }
      for (int t = 0; t < T; ++t) {
        const __m512 dx = _mm512_set1_ps(xd[t][blk]);
        for (int g = 0; g < G; ++g)
          acc[g][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[g][t]), _mm512_mul_ps(scale[g], dx),
                                      acc[g][t]);
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    __m512 rows[G];
    for (int g = 0; g < G; ++g) rows[g] = acc[g][t];
    store_rows(a, t, rows);
  }
}

// F16 and BF16 weights: column steps of 16 rows. F16 takes float activations and adds one
// column per step (vcvtph2ps + FMA); BF16 takes bf16 activations and adds a column pair per
// step (vdpbf16ps). Per row lane, steps are summed in two interleaved chains (even and odd
// steps, in order) added at the end, to hide FMA latency when a tile has few rows and tokens;
// the same for every tile shape.
struct F16Columns {
  static constexpr int kCols = 1;
  using W = __m512;
  static W load_w(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  using X = __m512;
  static X load_x(const uint8_t* x_row, int64_t col) {
    return _mm512_set1_ps(reinterpret_cast<const float*>(x_row)[col]);
  }
  static __m512 step(__m512 acc, W w, X x) { return _mm512_fmadd_ps(w, x, acc); }
};
struct BF16Pairs {
  static constexpr int kCols = 2;
  using W = __m512i;
  static W load_w(const uint16_t* p) { return _mm512_loadu_si512(p); }
  using X = __m512i;
  static X load_x(const uint8_t* x_row, int64_t col) {
    int32_t pair;
    __builtin_memcpy(&pair, reinterpret_cast<const uint16_t*>(x_row) + col, 4);
    return _mm512_set1_epi32(pair);
  }
  static __m512 step(__m512 acc, W w, X x) {
    return _mm512_dpbf16_ps(acc, reinterpret_cast<const __m512bh&>(w),
                            reinterpret_cast<const __m512bh&>(x));
  }
};

template <class S, int G, int T>
void float_tile(const PackedArgs& a) {
  const int64_t cols = a.cols;
  const uint16_t* base[G];
  for (int g = 0; g < G; ++g)
    base[g] = reinterpret_cast<const uint16_t*>(a.w) + g * cols * kPackRows;
  __m512 acc[2][G][T];
  for (int h = 0; h < 2; ++h)
    for (int g = 0; g < G; ++g)
      for (int t = 0; t < T; ++t) acc[h][g][t] = _mm512_setzero_ps();
  // Each step of k reads one line (F16) or two (BF16) per group: this tile prefetches the
  // steps whose index is its part modulo the parts (see PackedArgs::prefetch_ahead).
  int prefetch_countdown = a.prefetch_part;
  for (int64_t k = 0; k < cols; k += 2 * S::kCols) {
    const bool prefetch = a.prefetch_ahead != 0 && prefetch_countdown == 0;
    prefetch_countdown = prefetch_countdown == 0 ? a.prefetch_parts - 1 : prefetch_countdown - 1;
    for (int h = 0; h < 2; ++h) {
      const int64_t col = k + h * S::kCols;
      typename S::W w[G];
      for (int g = 0; g < G; ++g) {
        // One prefetch per 64-byte line: an F16 step is half a line (the odd step's line is
        // the even step's), a BF16 step a whole one.
        if (prefetch && (S::kCols == 2 || h == 0))
          _mm_prefetch(reinterpret_cast<const char*>(base[g] + col * kPackRows) + a.prefetch_ahead,
                       _MM_HINT_T0);
        w[g] = S::load_w(base[g] + col * kPackRows);
      }
      for (int t = 0; t < T; ++t) {
        const typename S::X x = S::load_x(a.x + t * a.x_stride, col);
        for (int g = 0; g < G; ++g) acc[h][g][t] = S::step(acc[h][g][t], w[g], x);
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    __m512 rows[G];
    for (int g = 0; g < G; ++g) rows[g] = _mm512_add_ps(acc[0][g][t], acc[1][g][t]);
    store_rows(a, t, rows);
  }
}

// The tile functions for 1..kPackedTileTokens tokens, picked at run time.
template <int G, Block32 F>
struct QuantTile {
  template <int T>
  static void run(const PackedArgs& a) {
    tile<F, G, T>(a);
  }
};
template <int G>
struct Iq4XsTile {
  template <int T>
  static void run(const PackedArgs& a) {
    tile_iq4_xs<G, T>(a);
  }
};
template <int G, class S>
struct FloatTile {
  template <int T>
  static void run(const PackedArgs& a) {
    float_tile<S, G, T>(a);
  }
};
template <class Tile>
void by_tokens(const PackedArgs& a, int n_tok) {
  static_assert(kPackedTileTokens == 6, "cases below");
  switch (n_tok) {
    case 1:
      return Tile::template run<1>(a);
    case 2:
      return Tile::template run<2>(a);
    case 3:
      return Tile::template run<3>(a);
    case 4:
      return Tile::template run<4>(a);
    case 5:
      return Tile::template run<5>(a);
    default:
      return Tile::template run<6>(a);
  }
}

template <int G>
void by_dtype(Dtype dtype, const PackedArgs& a, int n_tok) {
  switch (dtype) {
    case Dtype::kQ8_0:
      return by_tokens<QuantTile<G, Block32::kQ8_0>>(a, n_tok);
    case Dtype::kQ4_0:
      return by_tokens<QuantTile<G, Block32::kQ4_0>>(a, n_tok);
    case Dtype::kMXFP4:
      return by_tokens<QuantTile<G, Block32::kMxfp4>>(a, n_tok);
    case Dtype::kIQ4_NL:
      return by_tokens<QuantTile<G, Block32::kIq4Nl>>(a, n_tok);
    case Dtype::kIQ4_XS:
      return by_tokens<Iq4XsTile<G>>(a, n_tok);
    case Dtype::kF16:
      return by_tokens<FloatTile<G, F16Columns>>(a, n_tok);
    default:
      return by_tokens<FloatTile<G, BF16Pairs>>(a, n_tok);
  }
}

}  // namespace

size_t packed_act_row_bytes(int64_t cols) {
  // Per 32 columns: 32 q, d, and Q4_0's, Q8_0's and MXFP4's dot starts; per 256 (where whole):
  // 256 q256, d256 and 8 + 16 int16 sums (PackedActRow).
  // An odd number of cache lines: with a power-of-two stride (2048 bytes at 1024 columns) the
  // token rows of a tile all fall into the same few L1 sets.
  const size_t per256 =
      cols % 256 == 0 ? cols + (cols / 256) * sizeof(float) + (cols / 32 + cols / 16) * 2 : 0;
  const size_t lines = (cols + 4 * (cols / 32) * sizeof(float) + per256 + 63) / 64;
  return 64 * (lines | 1);
}

int packed_tile_tokens(Dtype dtype) {
  if (reads_per_256(dtype)) return kPackedPer256TileTokens;
  return dtype == Dtype::kBF16 && amx_enabled() ? kAmxTileTokens : kPackedTileTokens;
}

void packed_tile(Dtype dtype, const PackedArgs& a, int n_tok) {
  static_assert(kPackedTileGroups == 2, "one or two groups below");
  if (dtype == Dtype::kBF16 && amx_enabled()) return packed_tile_amx_bf16(a, n_tok);
  if (dtype == Dtype::kQ2_K || dtype == Dtype::kQ3_K) return packed_tile_q2_k_q3_k(dtype, a, n_tok);
  if (dtype == Dtype::kQ4_K || dtype == Dtype::kQ5_K) return packed_tile_q4_k_q5_k(dtype, a, n_tok);
  if (dtype == Dtype::kQ6_K) return packed_tile_q6_k(a, n_tok);
  if (a.n_rows > 16)
    by_dtype<2>(dtype, a, n_tok);
  else
    by_dtype<1>(dtype, a, n_tok);
}

}  // namespace loom::kernels::cpu
