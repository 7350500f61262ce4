// Multi-query attention: the AVX-512 path when the ISA and head size allow, otherwise one
// kernels::attention call per query.
#include "kernels/attention.h"

#include <immintrin.h>

#include <algorithm>

#include "base/status.h"
#include "kernels/cpu/isa.h"

namespace loom::kernels {
namespace {

constexpr int kTileTokens = 16;  // K/V tokens converted to float at a time (attention_avx512)

bool use_avx512(int64_t head_dim) {
  return active_isa() == Isa::kAvx512 && head_dim % 16 == 0 && head_dim <= 256;
}

}  // namespace

size_t attention_scratch_floats(int n_q, int32_t max_n_kv, int64_t head_dim) {
  // Scores per query padded to whole tiles, one tile of converted K/V tokens, the queries'
  // rows and one normalizer per query (attention_avx512.cpp lays them out in that order).
  const size_t padded =
      (static_cast<size_t>(max_n_kv) + kTileTokens - 1) / kTileTokens * kTileTokens;
  return static_cast<size_t>(n_q) * (padded + head_dim + 1) + kTileTokens * head_dim;
}

namespace {

void prefetch_lines(const uint8_t* p, uint64_t bytes) {
  for (uint64_t off = 0; off < bytes; off += 64)
    _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T1);
}

// The lines of tokens [kv_begin, n_kv) of a head: per block, one span when the block's tokens
// of this head are contiguous (dim-major: the whole block, or rows of adjacent tokens), else
// token by token.
void prefetch_head(const PagedHead& h, int32_t kv_begin, int32_t n_kv, int64_t head_dim) {
  const uint64_t esize = h.dtype == Dtype::kF32 ? 4 : 2;
  const uint64_t row = head_dim * esize;
  for (int32_t j0 = kv_begin; j0 < n_kv;) {
    const int32_t n = std::min(h.block_size - j0 % h.block_size, n_kv - j0);
    if (!h.row_layout())
      prefetch_lines(h.token(j0 - j0 % h.block_size), head_dim * h.dim_bytes());
    else if (h.token_stride == row)
      prefetch_lines(h.token(j0), n * row);
    else
      for (int32_t t = 0; t < n; ++t) prefetch_lines(h.token(j0 + t), row);
    j0 += n;
  }
}

}  // namespace

void prefetch_attention(const PagedHead& k, const PagedHead& v, int32_t n_kv, int64_t head_dim,
                        int32_t kv_begin) {
  if (active_isa() == Isa::kScalar) return;
  prefetch_head(k, kv_begin, n_kv, head_dim);
  prefetch_head(v, kv_begin, n_kv, head_dim);
}

void attention_multi(const AttentionQuery* queries, int n_q, const PagedHead& k, const PagedHead& v,
                     int64_t head_dim, float scale, float* scratch, float softcap) {
  attention_multi_heads(queries, n_q, &k, &v, 1, head_dim, scale, scratch, softcap);
}

void attention_multi_heads(const AttentionQuery* queries, int n_q, const PagedHead* k,
                           const PagedHead* v, int n_heads, int64_t head_dim, float scale,
                           float* scratch, float softcap) {
  LOOM_CHECK(n_heads > 0 && n_q % n_heads == 0);
  LOOM_CHECK(softcap >= 0.0f);
  if (use_avx512(head_dim)) {
    cpu::attention_multi_avx512(queries, n_q, k, v, n_heads, head_dim, scale, scratch, softcap);
    return;
  }
  const int per_head = n_q / n_heads;
  for (int i = 0; i < n_q; ++i)
    attention(queries[i].q, k[i / per_head], v[i / per_head], head_dim, queries[i].n_kv, scale,
              scratch, queries[i].out, queries[i].kv_begin, softcap, queries[i].sink);
}

}  // namespace loom::kernels
