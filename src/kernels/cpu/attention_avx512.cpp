// AVX-512 multi-query attention (see kernels/attention.h). Keys go 16 at a time, one per lane:
// with K stored dim-major in the cache (backend/cpu/kv_storage.h), dimension d of 16 consecutive
// keys is one 16-value load, so a query's 16 scores are FMA chains over d against a broadcast q[d]
// (no horizontal sums), and that load serves a block of up to 4 queries. V tokens are
// converted to float 16 at a time; blocks of 4 queries share each V load.
//
// Per query the arithmetic is fixed: score_j = (four partial sums over d = c mod 4, in order,
// added pairwise) * scale, then softcap * tanh(score_j / softcap) if capped; softmax over
// [kv_begin, n_kv) with a vector max, e_j = exp(score_j - max), sum of e_j in lane j mod 16
// over j in order then reduced; out = (sum_j e_j v_j in j order) * (1 / sum). Nothing depends
// on which other queries share the call (so neither on the first tile the call reads: the one
// holding the lowest kv_begin), how they are blocked, or the cache's layout.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstring>
#include <utility>

#include "base/fp16.h"
#include "base/status.h"
#include "kernels/attention.h"
#include "kernels/cpu/vec_math_avx512.h"

namespace loom::kernels::cpu {
namespace {

constexpr int kTile = 16;
constexpr int kChains = 4;      // partial sums per score: dimensions d = c mod 4 (FMA latency)
constexpr int kQueryBlock = 4;  // queries sharing each K load (16 accumulators)
// Queries sharing each pair of K tiles read in place (24 accumulators): per dimension 2 K
// loads and 3 broadcasts feed 6 FMAs, against 2 and 8 for 8 in two single-tile blocks of 4.
constexpr int kPairQueryBlock = 3;

uint64_t elem_bytes(Dtype dt) {
  return dt == Dtype::kF32 ? 4 : 2;
}

template <Dtype DT>
inline __m512 load16(const uint8_t* p) {
  if constexpr (DT == Dtype::kF16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  } else if constexpr (DT == Dtype::kBF16) {
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
  } else {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(p));
  }
}

float load_scalar(Dtype dt, const uint8_t* p) {
  uint16_t h;
  switch (dt) {
    case Dtype::kF16:
      std::memcpy(&h, p, 2);
      return fp16_to_f32(h);
    case Dtype::kBF16:
      std::memcpy(&h, p, 2);
      return bf16_to_f32(h);
    default: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
  }
}

inline __mmask16 tail_mask(int32_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
}

// Lanes t with lo <= t < hi (hi > 0; lo may be negative).
inline __mmask16 range_mask(int32_t lo, int32_t hi) {
  return lo > 0 ? static_cast<__mmask16>(tail_mask(hi) & ~tail_mask(lo)) : tail_mask(hi);
}

// Where the 16 keys of a tile are: dimension d of key j0 + t is the t-th value at
// data + d * d_stride, of type dtype.
struct KeyTile {
  const uint8_t* data;
  uint64_t d_stride;
  Dtype dtype;
  // Keys read in place: where the tile kAhead tiles later starts (same d_stride), prefetched
  // a line at a time as this tile is read (nullptr: none).
  const uint8_t* ahead = nullptr;
};

// Whether tiles can be read straight from the cache: 16 keys' values of one dimension are
// adjacent (K dim-major) and a tile never straddles a block.
bool keys_direct(const PagedHead& k) {
  return k.token_stride == elem_bytes(k.dtype) && k.block_size % kTile == 0;
}

// The tile of keys [j0, j0 + nt): in the cache, or gathered into scratch as floats [d][16],
// keys before j0 + first (ahead of every window in the call) left out as zeros: their blocks
// may hold other tokens by now.
KeyTile key_tile(const PagedHead& k, int32_t j0, int first, int nt, int64_t D, float* gather) {
  if (keys_direct(k)) return {k.at(j0, 0), k.dim_bytes(), k.dtype};
  for (int t = 0; t < kTile; ++t)
    for (int64_t d = 0; d < D; ++d)
      gather[d * kTile + t] = t >= first && t < nt ? load_scalar(k.dtype, k.at(j0 + t, d)) : 0.0f;
  return {reinterpret_cast<const uint8_t*>(gather), kTile * sizeof(float), Dtype::kF32};
}

void prefetch_keys(const PagedHead& k, int32_t j0, int64_t D) {
  if (!keys_direct(k)) return;
  const uint8_t* p = k.at(j0, 0);
  const uint64_t step = k.dim_bytes();
  for (int64_t d = 0; d < D; d += step >= 64 ? 1 : 64 / step)
    _mm_prefetch(reinterpret_cast<const char*>(p + d * step), _MM_HINT_T0);
}

// Prefetches V tokens [j0, j0 + n) (row layout: a token's values adjacent).
void prefetch_values(const PagedHead& v, int32_t j0, int n, int64_t D) {
  const int64_t bytes = D * elem_bytes(v.dtype);
  for (int t = 0; t < n; ++t) {
    const char* p = reinterpret_cast<const char*>(v.token(j0 + t));
    for (int64_t off = 0; off < bytes; off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
  }
}

// Scores of NT consecutive key tiles (keys j0 + 16 u + t) for QB queries (rows of D floats at
// q): scores[i * stride + 16 u + t] = scale * q_i . k_t for the first n[i] - 16 u keys of tile
// u. Per lane, kChains FMA chains (d = c mod kChains, d ascending) added as (0 + 1) + (2 + 3):
// the same for every QB and NT. Two tiles at a time (decode's 1-2 queries per KV head) load
// each broadcast q value once for both: 3 loads per 2 FMAs became 2 per 2.
template <Dtype DT, int QB, int NT, bool kPrefetchAhead>
void tile_scores(const KeyTile* kt, int64_t D, const float* q, __m512 scale, const int* n,
                 float* scores, size_t stride) {
  static_assert(kChains == 4, "the final sum below");
  __m512 acc[NT][QB][kChains];
  for (int u = 0; u < NT; ++u)
    for (int i = 0; i < QB; ++i)
      for (int c = 0; c < kChains; ++c) acc[u][i][c] = _mm512_setzero_ps();
  // One prefetch per line of the tile ahead: dimension d starts a line when
  // (d & line_mask) == 0 (64 / d_stride dimensions per line: 1, 2 or 4, as kChains divides).
  int line_mask[NT];
  for (int u = 0; u < NT; ++u)
    line_mask[u] = kt[u].d_stride >= 64 ? 0 : static_cast<int>(64 / kt[u].d_stride) - 1;
  for (int64_t d = 0; d < D; d += kChains)
    for (int c = 0; c < kChains; ++c) {
      __m512 k[NT];
      for (int u = 0; u < NT; ++u) {
        if (kPrefetchAhead && kt[u].ahead && (c & line_mask[u]) == 0)
          _mm_prefetch(reinterpret_cast<const char*>(kt[u].ahead + (d + c) * kt[u].d_stride),
                       _MM_HINT_T0);
        k[u] = load16<DT>(kt[u].data + (d + c) * kt[u].d_stride);
      }
      for (int i = 0; i < QB; ++i) {
        const __m512 qv = _mm512_set1_ps(q[i * D + d + c]);
        for (int u = 0; u < NT; ++u) acc[u][i][c] = _mm512_fmadd_ps(qv, k[u], acc[u][i][c]);
      }
    }
  for (int u = 0; u < NT; ++u)
    for (int i = 0; i < QB; ++i) {
      const __m512 sum = _mm512_add_ps(_mm512_add_ps(acc[u][i][0], acc[u][i][1]),
                                       _mm512_add_ps(acc[u][i][2], acc[u][i][3]));
      const int left = n[i] - kTile * u;
      if (left > 0)
        _mm512_mask_storeu_ps(scores + i * stride + kTile * u, tail_mask(left),
                              _mm512_mul_ps(sum, scale));
    }
}

template <Dtype DT, bool kPrefetchAhead>
void tile_scores_any(int qb, int nt, const KeyTile* kt, int64_t D, const float* q, __m512 scale,
                     const int* n, float* scores, size_t stride) {
  static_assert(kQueryBlock == 4, "cases below");
  static_assert(kPairQueryBlock == 3, "cases below");
  if (nt == 2) {
    if (qb == 1) return tile_scores<DT, 1, 2, kPrefetchAhead>(kt, D, q, scale, n, scores, stride);
    if (qb == 2) return tile_scores<DT, 2, 2, kPrefetchAhead>(kt, D, q, scale, n, scores, stride);
    return tile_scores<DT, 3, 2, kPrefetchAhead>(kt, D, q, scale, n, scores, stride);
  }
  switch (qb) {
    case 1:
      return tile_scores<DT, 1, 1, kPrefetchAhead>(kt, D, q, scale, n, scores, stride);
    case 2:
      return tile_scores<DT, 2, 1, kPrefetchAhead>(kt, D, q, scale, n, scores, stride);
    case 3:
      return tile_scores<DT, 3, 1, kPrefetchAhead>(kt, D, q, scale, n, scores, stride);
    default:
      return tile_scores<DT, 4, 1, kPrefetchAhead>(kt, D, q, scale, n, scores, stride);
  }
}

// tile_scores_any, prefetching the tiles ahead (KeyTile::ahead) when they are set.
template <Dtype DT>
void tile_scores_dispatch(bool ahead, int qb, int nt, const KeyTile* kt, int64_t D, const float* q,
                          __m512 scale, const int* n, float* scores, size_t stride) {
  if (ahead)
    tile_scores_any<DT, true>(qb, nt, kt, D, q, scale, n, scores, stride);
  else
    tile_scores_any<DT, false>(qb, nt, kt, D, q, scale, n, scores, stride);
}

// Tokens [j0, j0 + n) of a row-layout head as floats: dst[t * head_dim + d].
void load_tokens(const PagedHead& h, int32_t j0, int n, int64_t head_dim, float* dst) {
  for (int t = 0; t < n; ++t) {
    const uint8_t* src = h.token(j0 + t);
    float* out = dst + t * head_dim;
    switch (h.dtype) {
      case Dtype::kF32:
        std::memcpy(out, src, head_dim * sizeof(float));
        break;
      case Dtype::kF16:
        for (int64_t c = 0; c < head_dim; c += 16)
          _mm512_storeu_ps(out + c, load16<Dtype::kF16>(src + 2 * c));
        break;
      case Dtype::kBF16:
        for (int64_t c = 0; c < head_dim; c += 16)
          _mm512_storeu_ps(out + c, load16<Dtype::kBF16>(src + 2 * c));
        break;
      default:
        LOOM_CHECK(false && "KV dtype must be f32, f16 or bf16");
    }
  }
}

// Replaces s[begin, n) by softcap * tanh(s / softcap).
inline void softcap_scores(float* s, int32_t begin, int32_t n, float softcap) {
  const __m512 cap = _mm512_set1_ps(softcap);
  for (int32_t j = begin / 16 * 16; j < n; j += 16) {
    const __mmask16 k = range_mask(begin - j, n - j);
    const __m512 x = _mm512_maskz_loadu_ps(k, s + j);
    _mm512_mask_storeu_ps(s + j, k, _mm512_mul_ps(cap, tanh_ps(_mm512_div_ps(x, cap))));
  }
}

// Replaces s[begin, n) by exp(s - max) and returns 1 / their sum. s is 16-float aligned to
// the token index (lane j mod 16 sums e_j), so the sum does not depend on where s starts.
// A sink (> -inf) joins the max and adds exp(sink - max) to the sum after the lanes reduce.
inline float softmax_unnormalized(float* s, int32_t begin, int32_t n, float sink) {
  const int32_t first = begin / 16 * 16;
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int32_t j = first; j < n; j += 16)
    mx = _mm512_max_ps(
        mx, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), range_mask(begin - j, n - j), s + j));
  const float m_all = std::max(_mm512_reduce_max_ps(mx), sink);
  const __m512 m = _mm512_set1_ps(m_all);
  __m512 sum = _mm512_setzero_ps();
  for (int32_t j = first; j < n; j += 16) {
    const __mmask16 k = range_mask(begin - j, n - j);
    const __m512 e =
        _mm512_maskz_mov_ps(k, exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + j), m)));
    _mm512_mask_storeu_ps(s + j, k, e);
    sum = _mm512_add_ps(sum, e);
  }
  if (sink == -INFINITY) return 1.0f / _mm512_reduce_add_ps(sum);
  return 1.0f / (_mm512_reduce_add_ps(sum) + std::exp(sink - m_all));
}

// The largest divisor of c that is at most limit.
constexpr int divisor_at_most(int c, int limit) {
  for (int d = limit; d > 1; --d)
    if (c % d == 0) return d;
  return 1;
}

// The V rows of a tile: token t's D values (of type dtype) at data + t * stride.
struct ValueRows {
  const uint8_t* data;
  uint64_t stride;
  // Rows read in place: row t of the tile kAhead tiles later is at ahead + t * stride,
  // prefetched as row t of this tile is read (nullptr: none).
  const uint8_t* ahead = nullptr;
};

// out_i += sum over tokens t in [t0, t1) of e_i[t] * v_t for Q queries (D = 16 C values of
// type DT per row), CB vectors of 16 dimensions at a time so that the Q x CB sums stay in
// registers and each V load serves all Q queries. A query's chain per dimension runs over t
// in order whatever Q and CB are, and continues across calls through out.
template <Dtype DT, int C, int Q, bool kPrefetchAhead>
__attribute__((noinline)) void accumulate_v(ValueRows rows, int t0, int t1, const float* const* e,
                                            float* const* out) {
  constexpr int CB = divisor_at_most(C, 16 / Q);
  constexpr uint64_t kElem = DT == Dtype::kF32 ? 4 : 2;
  for (int c0 = 0; c0 < C; c0 += CB) {
    __m512 acc[Q][CB];
    for (int i = 0; i < Q; ++i)
      for (int c = 0; c < CB; ++c) acc[i][c] = _mm512_loadu_ps(out[i] + 16 * (c0 + c));
    for (int t = t0; t < t1; ++t) {
      if (kPrefetchAhead && c0 == 0)
        for (uint64_t off = 0; off < 16 * C * kElem; off += 64)
          _mm_prefetch(reinterpret_cast<const char*>(rows.ahead + t * rows.stride + off),
                       _MM_HINT_T0);
      __m512 v[CB];
      for (int c = 0; c < CB; ++c)
        v[c] = load16<DT>(rows.data + t * rows.stride + 16 * (c0 + c) * kElem);
      for (int i = 0; i < Q; ++i) {
        const __m512 p = _mm512_set1_ps(e[i][t]);
        for (int c = 0; c < CB; ++c) acc[i][c] = _mm512_fmadd_ps(p, v[c], acc[i][c]);
      }
    }
    for (int i = 0; i < Q; ++i)
      for (int c = 0; c < CB; ++c) _mm512_storeu_ps(out[i] + 16 * (c0 + c), acc[i][c]);
  }
}

// accumulate_v over each query's own tokens [b_i, n_i) of the tile (non-empty): the tokens
// all Q attend to together, each query's earlier ones alone before and its later ones alone
// after, so every query's chain still runs over its tokens in order.
template <Dtype DT, int C, int Q, bool kPrefetchAhead>
void accumulate_v_block(ValueRows rows, const float* const* e, const int* b, const int* n,
                        float* const* out) {
  int lo = b[0], hi = n[0];
  for (int i = 1; i < Q; ++i) {
    lo = std::max(lo, b[i]);
    hi = std::min(hi, n[i]);
  }
  if (lo >= hi) {
    for (int i = 0; i < Q; ++i)
      accumulate_v<DT, C, 1, kPrefetchAhead>(rows, b[i], n[i], e + i, out + i);
    return;
  }
  for (int i = 0; i < Q; ++i)
    if (b[i] < lo) accumulate_v<DT, C, 1, kPrefetchAhead>(rows, b[i], lo, e + i, out + i);
  accumulate_v<DT, C, Q, kPrefetchAhead>(rows, lo, hi, e, out);
  for (int i = 0; i < Q; ++i)
    if (n[i] > hi) accumulate_v<DT, C, 1, kPrefetchAhead>(rows, hi, n[i], e + i, out + i);
}

template <Dtype DT, int C, bool kPrefetchAhead = false>
void accumulate_v_any(int q, ValueRows rows, const float* const* e, const int* b, const int* n,
                      float* const* out) {
  switch (q) {
    case 4:
      return accumulate_v_block<DT, C, 4, kPrefetchAhead>(rows, e, b, n, out);
    case 3:
      return accumulate_v_block<DT, C, 3, kPrefetchAhead>(rows, e, b, n, out);
    case 2:
      return accumulate_v_block<DT, C, 2, kPrefetchAhead>(rows, e, b, n, out);
    default:
      return accumulate_v_block<DT, C, 1, kPrefetchAhead>(rows, e, b, n, out);
  }
}

// Attention of n_heads K/V heads (queries [h * n_q / n_heads, (h + 1) * n_q / n_heads) on
// head h), tile-major: each key tile, then each value tile, is read for every head before the
// next, so a decode step reading all heads of a block streams it as one contiguous span.
template <int C>
void attention_c(const AttentionQuery* qs, int n_q, const PagedHead* kh, const PagedHead* vh,
                 int n_heads, float scale, float softcap, float* scratch) {
  constexpr int D = 16 * C;
  const int per_head = n_q / n_heads;
  // The call reads tokens [kv_lo, max_kv): kv_lo the lowest kv_begin of a query with tokens
  // to attend; tiles start at j_lo, the one holding kv_lo, so a sliding window reads ~its
  // width whatever the depth. Scores are stored from j_lo on (still 16-aligned to j).
  int32_t max_kv = 0, kv_lo = INT32_MAX;
  for (int i = 0; i < n_q; ++i) {
    LOOM_CHECK(qs[i].kv_begin >= 0);
    max_kv = std::max(max_kv, qs[i].n_kv);
    if (qs[i].n_kv > qs[i].kv_begin) kv_lo = std::min(kv_lo, qs[i].kv_begin);
  }
  if (kv_lo == INT32_MAX) kv_lo = max_kv;
  const int32_t j_lo = kv_lo / kTile * kTile;
  const int32_t padded = (max_kv + kTile - 1) / kTile * kTile - j_lo;
  float* scores = scratch;                                   // [n_q][padded], from token j_lo
  float* tile = scores + static_cast<size_t>(n_q) * padded;  // [kTile][D]: V, or gathered K
  float* q_rows = tile + kTile * D;                          // [n_q][D]
  float* inv_sum = q_rows + static_cast<size_t>(n_q) * D;    // [n_q]
  const __m512 vscale = _mm512_set1_ps(scale);
  for (int i = 0; i < n_q; ++i) std::memcpy(q_rows + i * D, qs[i].q, D * sizeof(float));

  // K and V tiles are prefetched kAhead tiles before use (the first ones of both now).
  constexpr int kAhead = 2;
  for (int a = 0; a < kAhead && j_lo + a * kTile < max_kv; ++a)
    for (int h = 0; h < n_heads; ++h) {
      const int32_t j = std::max(kv_lo, j_lo + a * kTile);
      prefetch_keys(kh[h], j_lo + a * kTile, D);
      prefetch_values(vh[h], j, std::min<int32_t>(j_lo + (a + 1) * kTile, max_kv) - j, D);
    }

  // Scores, two K tiles at a time when the keys are read in place (else one), queries in
  // blocks sharing each load.
  const bool decode = per_head <= kQueryBlock;
  // Keys read in place go two tiles at a time, in blocks of up to 3 queries: 10 query rows
  // over 320 keys (a 5-token verify, GQA 2, head_dim 128) 11.1 -> 10.0 us hot, 32 rows 35.3 ->
  // 30.6 us (one thread, alternating runs), against single tiles in blocks of 4.
  bool pairs = true;
  for (int h = 0; h < n_heads; ++h) pairs = pairs && keys_direct(kh[h]);
  const int query_block = pairs ? kPairQueryBlock : kQueryBlock;
  const int32_t step = pairs ? 2 * kTile : kTile;
  for (int32_t j0 = j_lo; j0 < max_kv; j0 += step) {
    const int nt = j0 + kTile < max_kv && pairs ? 2 : 1;
    for (int h = 0; h < n_heads; ++h) {
      // Decode (one block of queries per head, waiting on DRAM): keys read in place prefetch
      // the tiles ahead a line at a time inside tile_scores, as the values do inside
      // accumulate_v; a whole tile's prefetches issued at once stalled the core until they
      // were under way (decode at depth 2048, Q4_0: 17.1 -> 13.4 ms per token, alternating
      // steps). Prefill (compute-bound, the cache mostly in L2) keeps the bursts: its
      // attention took 10% longer with the prefetches in the inner loops.
      const bool spread = decode && keys_direct(kh[h]);
      KeyTile kt[2];
      for (int u = 0; u < nt; ++u) {
        const int32_t t0 = j0 + kTile * u;
        kt[u] = key_tile(kh[h], t0, std::max(0, kv_lo - t0), std::min<int32_t>(kTile, max_kv - t0),
                         D, tile);
        if (spread && j0 + (kAhead + u) * kTile < max_kv)
          kt[u].ahead = kh[h].at(j0 + (kAhead + u) * kTile, 0);
      }
      for (int u = spread ? nt : 0; u < step / kTile; ++u)
        if (j0 + (kAhead + u) * kTile < max_kv) prefetch_keys(kh[h], j0 + (kAhead + u) * kTile, D);
      for (int i0 = h * per_head; i0 < (h + 1) * per_head; i0 += query_block) {
        const int qb = std::min(query_block, (h + 1) * per_head - i0);
        // Blocks none of whose queries attend to a key of these tiles (a later window, or
        // ended) skip them: the scores left unset lie outside every query's range.
        int n[kQueryBlock];
        bool any = false;
        for (int i = 0; i < qb; ++i) {
          n[i] = qs[i0 + i].n_kv - j0;
          any = any || (n[i] > 0 && qs[i0 + i].kv_begin < j0 + kTile * nt &&
                        qs[i0 + i].kv_begin < qs[i0 + i].n_kv);
        }
        if (!any) continue;
        float* out = scores + static_cast<size_t>(i0) * padded + (j0 - j_lo);
        const float* q = q_rows + static_cast<size_t>(i0) * D;
        switch (kt[0].dtype) {
          case Dtype::kF16:
            tile_scores_dispatch<Dtype::kF16>(spread, qb, nt, kt, D, q, vscale, n, out, padded);
            break;
          case Dtype::kBF16:
            tile_scores_dispatch<Dtype::kBF16>(spread, qb, nt, kt, D, q, vscale, n, out, padded);
            break;
          default:
            tile_scores_dispatch<Dtype::kF32>(spread, qb, nt, kt, D, q, vscale, n, out, padded);
        }
      }
    }
  }
  for (int i = 0; i < n_q; ++i) {
    if (qs[i].n_kv <= qs[i].kv_begin) {
      inv_sum[i] = 0.0f;
      continue;
    }
    float* row = scores + static_cast<size_t>(i) * padded;
    const int32_t begin = qs[i].kv_begin - j_lo, end = qs[i].n_kv - j_lo;
    if (softcap > 0.0f) softcap_scores(row, begin, end, softcap);
    inv_sum[i] = softmax_unnormalized(row, begin, end, qs[i].sink);
  }

  // Weighted sum of V, one V tile at a time; out holds the running sum. Blocks of up to 4
  // queries with tokens in the tile share the V loads.
  for (int i = 0; i < n_q; ++i) std::fill(qs[i].out, qs[i].out + D, 0.0f);
  for (int32_t j0 = j_lo; j0 < max_kv; j0 += kTile) {
    const int nt = std::min<int32_t>(kTile, max_kv - j0);
    const int first = std::max(0, kv_lo - j0);  // tokens before it are in no query's window
    for (int h = 0; h < n_heads; ++h) {
      const bool in_place =
          vh[h].dtype == Dtype::kF16 && vh[h].row_layout() && vh[h].block_size % kTile == 0;
      const bool ahead = j0 + kAhead * kTile < max_kv;
      const bool spread = decode && in_place;
      if (ahead && !spread)  // rows read in place in decode prefetch theirs in accumulate_v
        prefetch_values(vh[h], j0 + kAhead * kTile,
                        std::min<int32_t>(kTile, max_kv - j0 - kAhead * kTile), D);
      // F16 rows of a block are read in place (converted in registers); other types and
      // layouts are converted into a float tile first. In place also for prefill, where each
      // of a head's query blocks converts the rows again: its attention measured 148-160 ms
      // per Q4_0 pp512 call against 166-175 through the tile (and 148-179 with the tile kept
      // for more than one query block), alternating runs.
      if (!in_place) load_tokens(vh[h], j0 + first, nt - first, D, tile + first * D);
      ValueRows rows = in_place ? ValueRows{vh[h].token(j0), vh[h].token_stride}
                                : ValueRows{reinterpret_cast<const uint8_t*>(tile),
                                            static_cast<uint64_t>(D) * sizeof(float)};
      rows.ahead = spread && ahead ? vh[h].token(j0 + kAhead * kTile) : nullptr;
      const float* e[4];
      int b[4], n[4];
      float* out[4];
      int q = 0;
      const auto flush = [&] {
        if (rows.ahead)
          accumulate_v_any<Dtype::kF16, C, true>(q, rows, e, b, n, out);
        else if (in_place)
          accumulate_v_any<Dtype::kF16, C>(q, rows, e, b, n, out);
        else
          accumulate_v_any<Dtype::kF32, C>(q, rows, e, b, n, out);
        q = 0;
      };
      for (int i = h * per_head; i < (h + 1) * per_head; ++i) {
        b[q] = std::max(0, qs[i].kv_begin - j0);
        n[q] = std::max(0, std::min<int32_t>(nt, qs[i].n_kv - j0));
        if (b[q] >= n[q]) continue;
        e[q] = scores + static_cast<size_t>(i) * padded + (j0 - j_lo);
        out[q] = qs[i].out;
        if (++q == 4) flush();
      }
      if (q > 0) flush();
    }
  }
  for (int i = 0; i < n_q; ++i) {
    const __m512 inv = _mm512_set1_ps(inv_sum[i]);
    for (int c = 0; c < C; ++c)
      _mm512_storeu_ps(qs[i].out + 16 * c, _mm512_mul_ps(_mm512_loadu_ps(qs[i].out + 16 * c), inv));
  }
}

}  // namespace

void attention_multi_avx512(const AttentionQuery* queries, int n_q, const PagedHead* k,
                            const PagedHead* v, int n_heads, int64_t head_dim, float scale,
                            float* scratch, float softcap) {
  using Fn = void (*)(const AttentionQuery*, int, const PagedHead*, const PagedHead*, int, float,
                      float, float*);
  static constexpr auto kByChunks = []<size_t... I>(std::index_sequence<I...>) {
    return std::array<Fn, sizeof...(I)>{&attention_c<I + 1>...};
  }
  (std::make_index_sequence<16>{});
  LOOM_CHECK(head_dim % 16 == 0 && head_dim >= 16 && head_dim <= 256 &&
             "attention_multi_avx512: head_dim must be a multiple of 16, <= 256");
  kByChunks[head_dim / 16 - 1](queries, n_q, k, v, n_heads, scale, softcap, scratch);
}

}  // namespace loom::kernels::cpu
