// Multi-query attention: the AVX-512 path when the ISA and head size allow, otherwise one
// kernels::attention call per query.
#include "kernels/attention.h"

#include <algorithm>

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

void attention_multi(const AttentionQuery* queries, int n_q, const PagedHead& k, const PagedHead& v,
                     int64_t head_dim, float scale, float* scratch) {
  if (use_avx512(head_dim)) {
    cpu::attention_multi_avx512(queries, n_q, k, v, head_dim, scale, scratch);
    return;
  }
  for (int i = 0; i < n_q; ++i)
    attention(queries[i].q, k, v, head_dim, queries[i].n_kv, scale, scratch, queries[i].out);
}

}  // namespace loom::kernels
