// Multi-query paged attention: many query heads (the rows of one sequence in a step, and the
// query heads sharing one KV head under GQA) attend over the same K/V head together, so each
// K/V token is read from the cache and converted to float once for all of them.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/ops.h"

namespace loom::kernels {

struct AttentionQuery {
  const float* q = nullptr;  // head_dim values
  float* out = nullptr;      // head_dim values
  int32_t n_kv = 0;          // attends over tokens [kv_begin, n_kv) (causal: its position + 1)
  // First token attended (a sliding window of W tokens: max(0, n_kv - W)); 0 = all. Tokens
  // before it are never read (the cache may have reused their blocks); the softmax runs over
  // [kv_begin, n_kv) only. kv_begin >= n_kv gives zeros.
  int32_t kv_begin = 0;
  // Attention sink (gpt-oss): a logit with no value that joins the softmax's denominator,
  // exp(sink - m) with m the max over the scores and the sink. -inf: none (the bits are those
  // of the kernel without sinks).
  float sink = -INFINITY;
};

// Floats of scratch attention_multi needs for n_q queries of at most max_n_kv tokens.
size_t attention_scratch_floats(int n_q, int32_t max_n_kv, int64_t head_dim);

// For each query: out = sum_j softmax_j(s_j) v_j over kv_begin <= j < n_kv, with the score
// s_j = scale * q·k_j, or softcap * tanh(scale * q·k_j / softcap) when softcap > 0 (Gemma 2's
// attention logit soft-capping; 0 = off). scratch: attention_scratch_floats(n_q, max n_kv).
//
// Batch invariance: a query's result is bit-identical whichever other queries share the call:
// every score, the softmax and the weighted sum of V are computed per query in an order fixed
// by j, its own [kv_begin, n_kv) and head_dim alone (the range a call reads, which starts at
// the lowest kv_begin of its queries, does not enter). With kv_begin = 0 and softcap = 0 the
// bits are those of the kernel before either existed.
void attention_multi(const AttentionQuery* queries, int n_q, const PagedHead& k, const PagedHead& v,
                     int64_t head_dim, float scale, float* scratch, float softcap = 0.0f);

// attention_multi over n_heads K/V heads at once: queries [h * n_q / n_heads, (h + 1) * n_q /
// n_heads) attend over k[h], v[h] (n_q a multiple of n_heads). Results are bit-identical to one
// attention_multi call per head; the cache is read tile by tile across the heads, so a
// decode step over all heads of a sequence streams each block's K (then V) as one span
// (from DRAM, contiguous spans read faster than one head's scattered 4 KiB pieces).
void attention_multi_heads(const AttentionQuery* queries, int n_q, const PagedHead* k,
                           const PagedHead* v, int n_heads, int64_t head_dim, float scale,
                           float* scratch, float softcap = 0.0f);

// Prefetches (towards L2) every K/V line that attention over tokens [kv_begin, n_kv) will
// read: issued for the next (sequence, head) while this one runs, it keeps a decode step's
// scattered cache blocks streaming (loom_kernels_bench attn-dram: 12.4 -> ~8 us per 128-token
// head).
void prefetch_attention(const PagedHead& k, const PagedHead& v, int32_t n_kv, int64_t head_dim,
                        int32_t kv_begin = 0);

namespace cpu {
// The AVX-512 implementation (attention_avx512.cpp); head_dim must be a multiple of 16, <= 256.
void attention_multi_avx512(const AttentionQuery* queries, int n_q, const PagedHead* k,
                            const PagedHead* v, int n_heads, int64_t head_dim, float scale,
                            float* scratch, float softcap = 0.0f);
}  // namespace cpu

}  // namespace loom::kernels
