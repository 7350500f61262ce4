// AVX-512 multi-query attention (see kernels/attention.h), in one pass over the keys with an
// online softmax. Keys go 16 at a time, one per lane: with K stored dim-major in the cache
// (model/kv_cache.h), dimension d of 16 consecutive keys is one 16-value load, so a query's 16
// scores are FMA chains over d against a broadcast q[d] (no horizontal sums), and that load
// serves a block of up to 4 queries. The tile's V rows are then read straight from the cache
// (converted in registers), blocks of 4 queries sharing each load.
//
// Per query the arithmetic is fixed by j and head_dim alone: score_j = (four partial sums over
// d = c mod 4, in order, added pairwise) * scale; per tile of 16 keys, if the tile's max
// exceeds the running max m, the sum lanes and out are multiplied by exp(m - tile max) and m
// raised; e_j = exp(score_j - m) is added to 16 sum lanes (lane j mod 16) and e_j v_j to out
// in j order; at the end out * (1 / sum of the lanes). Nothing depends on which other
// queries share the call, how they are blocked, or the cache's layout.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>

#include "base/fp16.h"
#include "base/status.h"
#include "kernels/attention.h"
#include "kernels/cpu/vec_math_avx512.h"

// GCC 12 flags the undefined pass-through operand inside _mm512_cvtph_ps once it is inlined
// into the V loop (a false positive: the conversion is unmasked).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace loom::kernels::cpu {
namespace {

constexpr int kTile = 16;
constexpr int kChains = 4;      // partial sums per score: dimensions d = c mod 4 (FMA latency)
constexpr int kQueryBlock = 4;  // queries sharing each K load (16 accumulators)

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

// Where the 16 keys of a tile are: dimension d of key j0 + t is the t-th value at
// data + d * d_stride, of type dtype.
struct KeyTile {
  const uint8_t* data;
  uint64_t d_stride;
  Dtype dtype;
};

// Whether tiles can be read straight from the cache: 16 keys' values of one dimension are
// adjacent (K dim-major) and a tile never straddles a block.
bool keys_direct(const PagedHead& k) {
  return k.token_stride == elem_bytes(k.dtype) && k.block_size % kTile == 0;
}

// The tile of keys [j0, j0 + nt): in the cache, or gathered into scratch as floats [d][16].
KeyTile key_tile(const PagedHead& k, int32_t j0, int nt, int64_t D, float* gather) {
  if (keys_direct(k)) return {k.at(j0, 0), k.dim_bytes(), k.dtype};
  for (int t = 0; t < kTile; ++t)
    for (int64_t d = 0; d < D; ++d)
      gather[d * kTile + t] = t < nt ? load_scalar(k.dtype, k.at(j0 + t, d)) : 0.0f;
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

// One key tile for QB queries (rows of D floats at q, n[i] of the tile's keys each): the
// scores scale * q_i . k_t, per lane kChains FMA chains (d = c mod kChains, d ascending) added
// as (0 + 1) + (2 + 3); then the online softmax step, the QB queries interleaved: if the
// tile's max exceeds the query's running max, the max is raised and what was summed under
// the old one (the 16 sum lanes and out) multiplied by exp(old - new); the tile's weights
// exp(score - max) (0 past n[i]) go to probs[i * kTile + t] and are added to the sum lanes.
// The same arithmetic for every QB.
template <Dtype DT, int QB>
void tile_weights(const KeyTile& kt, int64_t D, const float* q, __m512 scale, const int* n,
                  float* probs, float* sums, float* maxes, float* const* outs) {
  static_assert(kChains == 4, "the final sum below");
  __m512 acc[QB][kChains];
  for (int i = 0; i < QB; ++i)
    for (int c = 0; c < kChains; ++c) acc[i][c] = _mm512_setzero_ps();
  for (int64_t d = 0; d < D; d += kChains)
    for (int c = 0; c < kChains; ++c) {
      const __m512 k = load16<DT>(kt.data + (d + c) * kt.d_stride);
      for (int i = 0; i < QB; ++i)
        acc[i][c] = _mm512_fmadd_ps(_mm512_set1_ps(q[i * D + d + c]), k, acc[i][c]);
    }
  __m512 s[QB];
  __mmask16 mask[QB];
  float tile_max[QB];
  for (int i = 0; i < QB; ++i) {
    const __m512 sum =
        _mm512_add_ps(_mm512_add_ps(acc[i][0], acc[i][1]), _mm512_add_ps(acc[i][2], acc[i][3]));
    mask[i] = n[i] > 0 ? tail_mask(n[i]) : 0;
    s[i] = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), mask[i], _mm512_mul_ps(sum, scale));
    tile_max[i] = _mm512_reduce_max_ps(s[i]);
  }
  for (int i = 0; i < QB; ++i) {
    if (mask[i] == 0) continue;
    __m512 lanes = _mm512_loadu_ps(sums + i * kTile);
    if (tile_max[i] > maxes[i]) {
      if (maxes[i] != -INFINITY) {  // (exp_ps does not reach 0: the first tile has no rescale)
        const __m512 f = exp_ps(_mm512_set1_ps(maxes[i] - tile_max[i]));
        for (int64_t d = 0; d < D; d += 16)
          _mm512_storeu_ps(outs[i] + d, _mm512_mul_ps(_mm512_loadu_ps(outs[i] + d), f));
        lanes = _mm512_mul_ps(lanes, f);
      }
      maxes[i] = tile_max[i];
    }
    const __m512 e =
        _mm512_maskz_mov_ps(mask[i], exp_ps(_mm512_sub_ps(s[i], _mm512_set1_ps(maxes[i]))));
    _mm512_storeu_ps(probs + i * kTile, e);
    _mm512_storeu_ps(sums + i * kTile, _mm512_add_ps(lanes, e));
  }
}

template <Dtype DT>
void tile_weights_any(int qb, const KeyTile& kt, int64_t D, const float* q, __m512 scale,
                      const int* n, float* probs, float* sums, float* maxes, float* const* outs) {
  static_assert(kQueryBlock == 4, "cases below");
  switch (qb) {
    case 1:
      return tile_weights<DT, 1>(kt, D, q, scale, n, probs, sums, maxes, outs);
    case 2:
      return tile_weights<DT, 2>(kt, D, q, scale, n, probs, sums, maxes, outs);
    case 3:
      return tile_weights<DT, 3>(kt, D, q, scale, n, probs, sums, maxes, outs);
    default:
      return tile_weights<DT, 4>(kt, D, q, scale, n, probs, sums, maxes, outs);
  }
}

// The largest divisor of c that is at most limit.
constexpr int divisor_at_most(int c, int limit) {
  for (int d = limit; d > 1; --d)
    if (c % d == 0) return d;
  return 1;
}

// out_i += sum over tokens t in [t0, t1) of e_i[t] * v_t for Q queries, v_t the 16 C values
// of type DT at rows[t] (straight from the cache), CB vectors of 16 dimensions at a time so
// that the Q x CB sums stay in registers and each V load serves all Q queries. A query's
// chain per dimension runs over t in order whatever Q and CB are, and continues across calls
// through out.
template <Dtype DT, int C, int Q>
__attribute__((noinline)) void accumulate_v(const uint8_t* const* rows, int t0, int t1,
                                            const float* const* e, float* const* out) {
  constexpr int CB = divisor_at_most(C, 16 / Q);
  constexpr uint64_t kVec = 16 * (DT == Dtype::kF32 ? 4 : 2);  // bytes of 16 values
  for (int c0 = 0; c0 < C; c0 += CB) {
    __m512 acc[Q][CB];
    for (int i = 0; i < Q; ++i)
      for (int c = 0; c < CB; ++c) acc[i][c] = _mm512_loadu_ps(out[i] + 16 * (c0 + c));
    for (int t = t0; t < t1; ++t) {
      __m512 v[CB];
      for (int c = 0; c < CB; ++c) v[c] = load16<DT>(rows[t] + kVec * (c0 + c));
      for (int i = 0; i < Q; ++i) {
        const __m512 p = _mm512_set1_ps(e[i][t]);
        for (int c = 0; c < CB; ++c) acc[i][c] = _mm512_fmadd_ps(p, v[c], acc[i][c]);
      }
    }
    for (int i = 0; i < Q; ++i)
      for (int c = 0; c < CB; ++c) _mm512_storeu_ps(out[i] + 16 * (c0 + c), acc[i][c]);
  }
}

// accumulate_v over each query's own tokens [0, n_i) of the tile: the tokens all Q attend
// to together, then each query's remaining ones alone.
template <Dtype DT, int C, int Q>
void accumulate_v_block(const uint8_t* const* rows, const float* const* e, const int* n,
                        float* const* out) {
  int all = n[0];
  for (int i = 1; i < Q; ++i) all = std::min(all, n[i]);
  if (all > 0) accumulate_v<DT, C, Q>(rows, 0, all, e, out);
  for (int i = 0; i < Q; ++i)
    if (n[i] > all) accumulate_v<DT, C, 1>(rows, all, n[i], e + i, out + i);
}

// The V tile at rows (nt tokens) weighted by the tile's probabilities, added to the outputs
// of queries [i_begin, i_end) in blocks of 4 sharing each V load.
template <Dtype DT, int C>
void accumulate_v_queries(const uint8_t* const* rows, const AttentionQuery* qs, int i_begin,
                          int i_end, const float* probs, int32_t j0, int nt) {
  const float* e[4];
  int n[4];
  float* out[4];
  for (int i = i_begin; i < i_end; i += 4) {
    const int q = std::min(4, i_end - i);
    for (int k = 0; k < q; ++k) {
      e[k] = probs + static_cast<size_t>(i + k) * kTile;
      n[k] = std::max(0, std::min<int32_t>(nt, qs[i + k].n_kv - j0));
      out[k] = qs[i + k].out;
    }
    switch (q) {
      case 4:
        accumulate_v_block<DT, C, 4>(rows, e, n, out);
        break;
      case 3:
        accumulate_v_block<DT, C, 3>(rows, e, n, out);
        break;
      case 2:
        accumulate_v_block<DT, C, 2>(rows, e, n, out);
        break;
      default:
        accumulate_v_block<DT, C, 1>(rows, e, n, out);
    }
  }
}

// Attention of n_heads K/V heads (queries [h * n_q / n_heads, (h + 1) * n_q / n_heads) on
// head h) in one pass over the keys with an online softmax: per tile of 16 keys and per head,
// the scores of its queries (blocks of 4 sharing each K load), their weights against each
// query's running max, and the weighted V added to the outputs. Tile-major, so a decode
// step reading all heads of a sequence streams each block (its K spans, then V spans) once.
template <int C>
void attention_c(const AttentionQuery* qs, int n_q, const PagedHead* kh, const PagedHead* vh,
                 int n_heads, float scale, float* scratch) {
  constexpr int D = 16 * C;
  const int per_head = n_q / n_heads;
  int32_t max_kv = 0;
  for (int i = 0; i < n_q; ++i) max_kv = std::max(max_kv, qs[i].n_kv);
  float* probs = scratch;                                  // [n_q][kTile]: scores, weights
  float* sums = probs + static_cast<size_t>(n_q) * kTile;  // [n_q][kTile]: running sums
  float* maxes = sums + static_cast<size_t>(n_q) * kTile;  // [n_q]: running maxes
  float* gather = maxes + n_q;                             // [D][kTile]: gathered K
  float* q_rows = gather + kTile * D;                      // [n_q][D]
  const __m512 vscale = _mm512_set1_ps(scale);
  for (int i = 0; i < n_q; ++i) {
    std::memcpy(q_rows + i * D, qs[i].q, D * sizeof(float));
    std::fill(qs[i].out, qs[i].out + D, 0.0f);
    std::fill(sums + i * kTile, sums + (i + 1) * kTile, 0.0f);
    maxes[i] = -INFINITY;
  }

  // K and V tiles are prefetched kAhead tiles before use (the first ones now).
  constexpr int kAhead = 2;
  for (int a = 0; a < kAhead && a * kTile < max_kv; ++a)
    for (int h = 0; h < n_heads; ++h) {
      prefetch_keys(kh[h], a * kTile, D);
      prefetch_values(vh[h], a * kTile, std::min<int32_t>(kTile, max_kv - a * kTile), D);
    }

  for (int32_t j0 = 0; j0 < max_kv; j0 += kTile) {
    const int nt = std::min<int32_t>(kTile, max_kv - j0);
    for (int h = 0; h < n_heads; ++h) {
      const int32_t ahead = j0 + kAhead * kTile;
      if (ahead < max_kv) {
        prefetch_keys(kh[h], ahead, D);
        prefetch_values(vh[h], ahead, std::min<int32_t>(kTile, max_kv - ahead), D);
      }
      const int i_begin = h * per_head, i_end = (h + 1) * per_head;
      const KeyTile kt = key_tile(kh[h], j0, nt, D, gather);
      for (int i0 = i_begin; i0 < i_end; i0 += kQueryBlock) {
        const int qb = std::min(kQueryBlock, i_end - i0);
        int n[kQueryBlock];
        float* outs[kQueryBlock];
        for (int i = 0; i < qb; ++i) {
          n[i] = std::min<int32_t>(nt, qs[i0 + i].n_kv - j0);
          outs[i] = qs[i0 + i].out;
        }
        const size_t at = static_cast<size_t>(i0) * kTile;
        const float* q = q_rows + static_cast<size_t>(i0) * D;
        switch (kt.dtype) {
          case Dtype::kF16:
            tile_weights_any<Dtype::kF16>(qb, kt, D, q, vscale, n, probs + at, sums + at,
                                          maxes + i0, outs);
            break;
          case Dtype::kBF16:
            tile_weights_any<Dtype::kBF16>(qb, kt, D, q, vscale, n, probs + at, sums + at,
                                           maxes + i0, outs);
            break;
          default:
            tile_weights_any<Dtype::kF32>(qb, kt, D, q, vscale, n, probs + at, sums + at,
                                          maxes + i0, outs);
        }
      }
      // The tile's V rows: one stride within a block when the tile does not straddle one.
      const uint8_t* rows[kTile];
      if (vh[h].block_size % kTile == 0) {
        rows[0] = vh[h].token(j0);
        for (int t = 1; t < nt; ++t) rows[t] = rows[0] + t * vh[h].token_stride;
      } else {
        for (int t = 0; t < nt; ++t) rows[t] = vh[h].token(j0 + t);
      }
      switch (vh[h].dtype) {
        case Dtype::kF16:
          accumulate_v_queries<Dtype::kF16, C>(rows, qs, i_begin, i_end, probs, j0, nt);
          break;
        case Dtype::kBF16:
          accumulate_v_queries<Dtype::kBF16, C>(rows, qs, i_begin, i_end, probs, j0, nt);
          break;
        case Dtype::kF32:
          accumulate_v_queries<Dtype::kF32, C>(rows, qs, i_begin, i_end, probs, j0, nt);
          break;
        default:
          LOOM_CHECK(false && "KV dtype must be f32, f16 or bf16");
      }
    }
  }
  for (int i = 0; i < n_q; ++i) {
    if (qs[i].n_kv <= 0) continue;  // no keys: the output stays 0
    const __m512 inv =
        _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(_mm512_loadu_ps(sums + i * kTile)));
    for (int c = 0; c < C; ++c)
      _mm512_storeu_ps(qs[i].out + 16 * c, _mm512_mul_ps(_mm512_loadu_ps(qs[i].out + 16 * c), inv));
  }
}

}  // namespace

void attention_multi_avx512(const AttentionQuery* queries, int n_q, const PagedHead* k,
                            const PagedHead* v, int n_heads, int64_t head_dim, float scale,
                            float* scratch) {
  using Fn =
      void (*)(const AttentionQuery*, int, const PagedHead*, const PagedHead*, int, float, float*);
  static constexpr auto kByChunks = []<size_t... I>(std::index_sequence<I...>) {
    return std::array<Fn, sizeof...(I)>{&attention_c<I + 1>...};
  }
  (std::make_index_sequence<16>{});
  LOOM_CHECK(head_dim % 16 == 0 && head_dim >= 16 && head_dim <= 256 &&
             "attention_multi_avx512: head_dim must be a multiple of 16, <= 256");
  kByChunks[head_dim / 16 - 1](queries, n_q, k, v, n_heads, scale, scratch);
}

}  // namespace loom::kernels::cpu
