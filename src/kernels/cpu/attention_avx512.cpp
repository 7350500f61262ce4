// AVX-512 multi-query attention (see kernels/attention.h). K/V tokens are converted to float
// 16 at a time and shared by every query of the call; q and the output stay in registers as
// C = head_dim / 16 vectors.
//
// Per query the arithmetic is fixed: score_j = (q * k_j accumulated chunk by chunk in d order,
// lanes summed by sum16's tree) * scale; softmax with a vector max, e_j = exp(score_j - max), sum
// of e_j in 16 lanes over j in order then reduced; out = (sum_j e_j v_j in j order) * (1 / sum).
// Nothing depends on which other queries share the call or how far they reach.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdlib>

#include "base/status.h"
#include "kernels/attention.h"
#include "kernels/cpu/vec_math_avx512.h"

namespace loom::kernels::cpu {
namespace {

constexpr int kTile = 16;

// Tokens [j0, j0 + n) of a paged head as floats: dst[t * head_dim + d].
void load_tokens(const PagedHead& h, int32_t j0, int n, int64_t head_dim, float* dst) {
  for (int t = 0; t < n; ++t) {
    const uint8_t* src = h.token(j0 + t);
    float* d = dst + t * head_dim;
    switch (h.dtype) {
      case Dtype::kF32:
        std::memcpy(d, src, head_dim * sizeof(float));
        break;
      case Dtype::kF16:
        for (int64_t c = 0; c < head_dim; c += 16)
          _mm512_storeu_ps(
              d + c,
              _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * c))));
        break;
      case Dtype::kBF16:
        for (int64_t c = 0; c < head_dim; c += 16) {
          const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * c));
          _mm512_storeu_ps(d + c,
                           _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16)));
        }
        break;
      default:
        LOOM_CHECK(false && "KV dtype must be f32, f16 or bf16");
    }
  }
}

// Prefetches tokens [j0, j0 + n) of a paged head (the next tile, while this one is used: a
// decode step reads every sequence's K/V from DRAM, and the tiles sit in scattered blocks).
void prefetch_tokens(const PagedHead& h, int32_t j0, int n, int64_t head_dim) {
  const int64_t bytes = head_dim * (h.dtype == Dtype::kF32 ? 4 : 2);
  for (int t = 0; t < n; ++t) {
    const char* p = reinterpret_cast<const char*>(h.token(j0 + t));
    for (int64_t off = 0; off < bytes; off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
  }
}

// Lane sums of 16 vectors, v[k] -> lane k, by a fixed tree (pairs of lanes, then 64-bit
// halves, then 128-bit quarters): ~3 operations per vector instead of a full reduction each.
inline __m512 sum16(const __m512 (&v)[16]) {
  __m512 w[8], x[4], z[2];
  for (int i = 0; i < 8; ++i)
    w[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                         _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(w[2 * i]), b = _mm512_castps_pd(w[2 * i + 1]);
    x[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  // Now quarter c of x[i] holds, for vectors 4i..4i+3 in order, the sums over quarter c.
  for (int i = 0; i < 2; ++i)
    z[i] = _mm512_add_ps(_mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(z[0], z[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(z[0], z[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// Scores of the 16 keys of a tile (tile[t * D + d]) for one query: lane t = scale * q·k_t.
// Always all 16 (a partial tile's extra lanes are garbage the caller ignores), so a key's
// score is computed the same way wherever it sits.
template <int C>
inline __m512 scores16(const __m512 (&q)[C], const float* tile, __m512 scale) {
  constexpr int D = 16 * C;
  __m512 acc[16];
  for (int t = 0; t < 16; ++t) acc[t] = _mm512_mul_ps(q[0], _mm512_loadu_ps(tile + t * D));
  for (int c = 1; c < C; ++c)
    for (int t = 0; t < 16; ++t)
      acc[t] = _mm512_fmadd_ps(q[c], _mm512_loadu_ps(tile + t * D + 16 * c), acc[t]);
  return _mm512_mul_ps(sum16(acc), scale);
}

inline __mmask16 tail_mask(int32_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
}

// Replaces s[0, n) by exp(s - max) and returns 1 / their sum.
inline float softmax_unnormalized(float* s, int32_t n) {
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int32_t j = 0; j < n; j += 16)
    mx =
        _mm512_max_ps(mx, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail_mask(n - j), s + j));
  const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  __m512 sum = _mm512_setzero_ps();
  for (int32_t j = 0; j < n; j += 16) {
    const __mmask16 k = tail_mask(n - j);
    const __m512 e =
        _mm512_maskz_mov_ps(k, exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + j), m)));
    _mm512_mask_storeu_ps(s + j, k, e);
    sum = _mm512_add_ps(sum, e);
  }
  return 1.0f / _mm512_reduce_add_ps(sum);
}

template <int C>
void attention_c(const AttentionQuery* qs, int n_q, const PagedHead& kh, const PagedHead& vh,
                 float scale, float* scratch) {
  constexpr int D = 16 * C;
  int32_t max_kv = 0;
  for (int i = 0; i < n_q; ++i) max_kv = std::max(max_kv, qs[i].n_kv);
  const int32_t padded = (max_kv + kTile - 1) / kTile * kTile;
  float* scores = scratch;                                   // [n_q][padded]
  float* tile = scores + static_cast<size_t>(n_q) * padded;  // [kTile][D]
  float* inv_sum = tile + kTile * D;                         // [n_q]
  const __m512 vscale = _mm512_set1_ps(scale);

  // K and V tiles are prefetched kAhead tiles before use (the first ones of both now).
  constexpr int kAhead = 2;
  auto prefetch_tile = [&](const PagedHead& h, int32_t j0) {
    if (j0 < max_kv) prefetch_tokens(h, j0, std::min<int32_t>(kTile, max_kv - j0), D);
  };
  if (getenv("LOOM_ATT_PF")) {
    const int32_t n_all = std::min<int32_t>(max_kv, atoi(getenv("LOOM_ATT_PF")));
    prefetch_tokens(kh, 0, n_all, D);
    prefetch_tokens(vh, 0, n_all, D);
  } else
  for (int a = 0; a < kAhead; ++a) {
    prefetch_tile(kh, a * kTile);
    prefetch_tile(vh, a * kTile);
  }

  // Scores, one K tile at a time.
  for (int32_t j0 = 0; j0 < max_kv; j0 += kTile) {
    const int nt = std::min<int32_t>(kTile, max_kv - j0);
    prefetch_tile(kh, j0 + kAhead * kTile);
    load_tokens(kh, j0, nt, D, tile);
    if (nt < kTile) std::fill(tile + nt * D, tile + kTile * D, 0.0f);  // scores16 reads all 16
    for (int i = 0; i < n_q; ++i) {
      const int n = std::min<int32_t>(nt, qs[i].n_kv - j0);
      if (n <= 0) continue;
      __m512 q[C];
      for (int c = 0; c < C; ++c) q[c] = _mm512_loadu_ps(qs[i].q + 16 * c);
      _mm512_mask_storeu_ps(scores + static_cast<size_t>(i) * padded + j0, tail_mask(n),
                            scores16<C>(q, tile, vscale));
    }
  }
  for (int i = 0; i < n_q; ++i)
    inv_sum[i] = qs[i].n_kv > 0
                     ? softmax_unnormalized(scores + static_cast<size_t>(i) * padded, qs[i].n_kv)
                     : 0.0f;

  // Weighted sum of V, one V tile at a time; out holds the running sum.
  for (int i = 0; i < n_q; ++i) std::fill(qs[i].out, qs[i].out + D, 0.0f);
  for (int32_t j0 = 0; j0 < max_kv; j0 += kTile) {
    const int nt = std::min<int32_t>(kTile, max_kv - j0);
    prefetch_tile(vh, j0 + kAhead * kTile);
    load_tokens(vh, j0, nt, D, tile);
    for (int i = 0; i < n_q; ++i) {
      const int n = std::min<int32_t>(nt, qs[i].n_kv - j0);
      if (n <= 0) continue;
      const float* e = scores + static_cast<size_t>(i) * padded + j0;
      __m512 acc[C];
      for (int c = 0; c < C; ++c) acc[c] = _mm512_loadu_ps(qs[i].out + 16 * c);
      for (int t = 0; t < n; ++t) {
        const __m512 p = _mm512_set1_ps(e[t]);
        for (int c = 0; c < C; ++c)
          acc[c] = _mm512_fmadd_ps(p, _mm512_loadu_ps(tile + t * D + 16 * c), acc[c]);
      }
      for (int c = 0; c < C; ++c) _mm512_storeu_ps(qs[i].out + 16 * c, acc[c]);
    }
  }
  for (int i = 0; i < n_q; ++i) {
    const __m512 inv = _mm512_set1_ps(inv_sum[i]);
    for (int c = 0; c < C; ++c)
      _mm512_storeu_ps(qs[i].out + 16 * c, _mm512_mul_ps(_mm512_loadu_ps(qs[i].out + 16 * c), inv));
  }
}

}  // namespace

void attention_multi_avx512(const AttentionQuery* queries, int n_q, const PagedHead& k,
                            const PagedHead& v, int64_t head_dim, float scale, float* scratch) {
  switch (head_dim / 16) {
#define LOOM_ATTN_CASE(c) \
  case c:                 \
    return attention_c<c>(queries, n_q, k, v, scale, scratch);
    LOOM_ATTN_CASE(1)
    LOOM_ATTN_CASE(2) LOOM_ATTN_CASE(3) LOOM_ATTN_CASE(4) LOOM_ATTN_CASE(5) LOOM_ATTN_CASE(6)
        LOOM_ATTN_CASE(7) LOOM_ATTN_CASE(8) LOOM_ATTN_CASE(9) LOOM_ATTN_CASE(10) LOOM_ATTN_CASE(11)
            LOOM_ATTN_CASE(12) LOOM_ATTN_CASE(13) LOOM_ATTN_CASE(14) LOOM_ATTN_CASE(15)
                LOOM_ATTN_CASE(16)
#undef LOOM_ATTN_CASE
                    default
        : LOOM_CHECK(false && "attention_multi_avx512: head_dim must be a multiple of 16, <= 256");
  }
}

}  // namespace loom::kernels::cpu
