// AVX-512 VNNI kernels for kRows16-packed Q8_0 / Q4_0 matrices (layout in kernels/packed.h).
//
// Weights are unsigned (Q8_0 stored as q + 128, Q4_0 nibbles 0..15 standing for q - 8) and the
// activations signed int8, so vpdpbusd(w, x) = sum (q + c) x = sum q x + c * sum x with
// c = 128 or 8: each block's int32 accumulator starts at -c * sum(x), which the activation row
// carries per block, and then holds the exact integer dot of the block for each of the 16
// rows in its own lane. Per block and token: lane * (d_w * d_x) FMA'd into a float lane per
// row, blocks in order. Nothing depends on the tile's token count or where a row sits, so a
// token's result is the same alone or in any batch.
#include "kernels/cpu/packed_kernels.h"

#include <immintrin.h>

#include "kernels/packed.h"

namespace loom::kernels::cpu {
namespace {

// Software prefetch distance for the first token tile (weights streaming from DRAM).
constexpr int kPrefetchBytes = 16384;

inline __m512i bcast4(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

template <bool kQ8, int G, int T>
void tile(const PackedArgs& a) {
  constexpr int kRec = kPackRows * 2 + (kQ8 ? 8 : 4) * 64;
  constexpr int kShift = kQ8 ? 7 : 3;  // c = 128 or 8
  const int64_t nb = a.cols / 32;
  const int8_t* xq[T];
  const float* xd[T];
  const int32_t* xs[T];
  for (int t = 0; t < T; ++t) {
    const uint8_t* row = a.x + t * a.x_stride;
    xq[t] = reinterpret_cast<const int8_t*>(row);
    xd[t] = reinterpret_cast<const float*>(row + a.cols);
    xs[t] = reinterpret_cast<const int32_t*>(xd[t] + nb);
  }
  __m512 acc[G][T];
  for (int g = 0; g < G; ++g)
    for (int t = 0; t < T; ++t) acc[g][t] = _mm512_setzero_ps();
  const __m512i nib = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* rec[G];
    __m512 dw[G];
    for (int g = 0; g < G; ++g) {
      rec[g] = a.w + (g * nb + b) * kRec;
      if (a.prefetch)
        for (int off = 0; off < kRec; off += 64)
          _mm_prefetch(reinterpret_cast<const char*>(rec[g] + kPrefetchBytes + off), _MM_HINT_T0);
      dw[g] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec[g])));
    }
    __m512i dot[G][T];
    for (int t = 0; t < T; ++t) {
      const __m512i init = _mm512_set1_epi32(-(xs[t][b] << kShift));
      for (int g = 0; g < G; ++g) dot[g][t] = init;
    }
    if constexpr (kQ8) {
      for (int k = 0; k < 8; ++k) {
        __m512i w[G];
        for (int g = 0; g < G; ++g) w[g] = _mm512_loadu_si512(rec[g] + kPackRows * 2 + 64 * k);
        for (int t = 0; t < T; ++t) {
          const __m512i x = bcast4(xq[t] + 32 * b + 4 * k);
          for (int g = 0; g < G; ++g) dot[g][t] = _mm512_dpbusd_epi32(dot[g][t], w[g], x);
        }
      }
    } else {
      for (int k = 0; k < 4; ++k) {
        __m512i lo[G], hi[G];
        for (int g = 0; g < G; ++g) {
          const __m512i v = _mm512_loadu_si512(rec[g] + kPackRows * 2 + 64 * k);
          lo[g] = _mm512_and_si512(v, nib);
          hi[g] = _mm512_and_si512(_mm512_srli_epi16(v, 4), nib);
        }
        for (int t = 0; t < T; ++t) {
          const __m512i xl = bcast4(xq[t] + 32 * b + 4 * k), xh = bcast4(xq[t] + 32 * b + 16 + 4 * k);
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
        acc[g][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[g][t]), _mm512_mul_ps(dw[g], dx), acc[g][t]);
    }
  }
  for (int g = 0; g < G; ++g) {
    const int n = a.n_rows - 16 * g;
    const __mmask16 keep = n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(a.out + t * a.out_stride + 16 * g, keep, acc[g][t]);
  }
}

// F16 (float activations, x[t] = a.x + t * a.x_stride as floats): per row lane, columns are
// summed in two interleaved chains (even and odd columns, in order) added at the end, for
// latency hiding when a tile has few rows and tokens; the same for every tile shape.
template <int G, int T>
void f16_tile(const PackedArgs& a) {
  const int64_t cols = a.cols;
  const float* x[T];
  for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const float*>(a.x + t * a.x_stride);
  const uint16_t* base[G];
  for (int g = 0; g < G; ++g) base[g] = reinterpret_cast<const uint16_t*>(a.w) + g * cols * kPackRows;
  __m512 acc[2][G][T];
  for (int h = 0; h < 2; ++h)
    for (int g = 0; g < G; ++g)
      for (int t = 0; t < T; ++t) acc[h][g][t] = _mm512_setzero_ps();
  for (int64_t k = 0; k < cols; k += 2) {
    if (a.prefetch)  // two columns = one 64-byte line per group
      for (int g = 0; g < G; ++g)
        _mm_prefetch(reinterpret_cast<const char*>(base[g] + k * kPackRows) + kPrefetchBytes, _MM_HINT_T0);
    for (int h = 0; h < 2; ++h) {
      __m512 w[G];
      for (int g = 0; g < G; ++g)
        w[g] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(base[g] + (k + h) * kPackRows)));
      for (int t = 0; t < T; ++t) {
        const __m512 xv = _mm512_set1_ps(x[t][k + h]);
        for (int g = 0; g < G; ++g) acc[h][g][t] = _mm512_fmadd_ps(w[g], xv, acc[h][g][t]);
      }
    }
  }
  for (int g = 0; g < G; ++g) {
    const int n = a.n_rows - 16 * g;
    const __mmask16 keep = n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
    for (int t = 0; t < T; ++t)
      _mm512_mask_storeu_ps(a.out + t * a.out_stride + 16 * g, keep, _mm512_add_ps(acc[0][g][t], acc[1][g][t]));
  }
}

// BF16 (bf16 activation rows): the same two-chain structure over column pairs.
template <int G, int T>
void bf16_tile(const PackedArgs& a) {
  const int64_t cols = a.cols;
  const uint16_t* x[T];
  for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const uint16_t*>(a.x + t * a.x_stride);
  const uint16_t* base[G];
  for (int g = 0; g < G; ++g) base[g] = reinterpret_cast<const uint16_t*>(a.w) + g * cols * kPackRows;
  __m512 acc[2][G][T];
  for (int h = 0; h < 2; ++h)
    for (int g = 0; g < G; ++g)
      for (int t = 0; t < T; ++t) acc[h][g][t] = _mm512_setzero_ps();
  for (int64_t k = 0; k < cols; k += 4) {  // two column pairs = 128 bytes per group
    for (int h = 0; h < 2; ++h) {
      const int64_t p = k + 2 * h;
      __m512i w[G];
      for (int g = 0; g < G; ++g) {
        if (a.prefetch)
          _mm_prefetch(reinterpret_cast<const char*>(base[g] + p * kPackRows) + kPrefetchBytes, _MM_HINT_T0);
        w[g] = _mm512_loadu_si512(base[g] + p * kPackRows);
      }
      for (int t = 0; t < T; ++t) {
        int32_t pair;
        __builtin_memcpy(&pair, x[t] + p, 4);
        const __m512i xv = _mm512_set1_epi32(pair);
        for (int g = 0; g < G; ++g)
          acc[h][g][t] = _mm512_dpbf16_ps(acc[h][g][t], reinterpret_cast<const __m512bh&>(w[g]),
                                          reinterpret_cast<const __m512bh&>(xv));
      }
    }
  }
  for (int g = 0; g < G; ++g) {
    const int n = a.n_rows - 16 * g;
    const __mmask16 keep = n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
    for (int t = 0; t < T; ++t)
      _mm512_mask_storeu_ps(a.out + t * a.out_stride + 16 * g, keep, _mm512_add_ps(acc[0][g][t], acc[1][g][t]));
  }
}

template <int G>
void bf16_dispatch(const PackedArgs& a, int n_tok) {
  switch (n_tok) {
    case 1: return bf16_tile<G, 1>(a);
    case 2: return bf16_tile<G, 2>(a);
    case 3: return bf16_tile<G, 3>(a);
    case 4: return bf16_tile<G, 4>(a);
    case 5: return bf16_tile<G, 5>(a);
    default: return bf16_tile<G, 6>(a);
  }
}

template <int G>
void f16_dispatch(const PackedArgs& a, int n_tok) {
  switch (n_tok) {
    case 1: return f16_tile<G, 1>(a);
    case 2: return f16_tile<G, 2>(a);
    case 3: return f16_tile<G, 3>(a);
    case 4: return f16_tile<G, 4>(a);
    case 5: return f16_tile<G, 5>(a);
    default: return f16_tile<G, 6>(a);
  }
}

template <bool kQ8, int G>
void dispatch(const PackedArgs& a, int n_tok) {
  switch (n_tok) {
    case 1: return tile<kQ8, G, 1>(a);
    case 2: return tile<kQ8, G, 2>(a);
    case 3: return tile<kQ8, G, 3>(a);
    case 4: return tile<kQ8, G, 4>(a);
    case 5: return tile<kQ8, G, 5>(a);
    default: return tile<kQ8, G, 6>(a);
  }
}

}  // namespace

size_t packed_act_row_bytes(int64_t cols) {
  return (cols + 2 * (cols / 32) * sizeof(float) + 63) & ~size_t{63};
}

void packed_tile(Dtype dtype, const PackedArgs& a, int n_tok) {
  static_assert(kPackedTileGroups == 2 && kPackedTileTokens == 6, "dispatch below");
  const int groups = (a.n_rows + 15) / 16;
  if (dtype == Dtype::kF16) return groups == 1 ? f16_dispatch<1>(a, n_tok) : f16_dispatch<2>(a, n_tok);
  if (dtype == Dtype::kBF16) return groups == 1 ? bf16_dispatch<1>(a, n_tok) : bf16_dispatch<2>(a, n_tok);
  const bool q8 = dtype == Dtype::kQ8_0;
  switch (groups) {
    case 1: return q8 ? dispatch<true, 1>(a, n_tok) : dispatch<false, 1>(a, n_tok);
    case 2: return q8 ? dispatch<true, 2>(a, n_tok) : dispatch<false, 2>(a, n_tok);
    default: return q8 ? dispatch<true, 2>(a, n_tok) : dispatch<false, 2>(a, n_tok);
  }
}

}  // namespace loom::kernels::cpu
