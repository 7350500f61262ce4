// The CPU Multi-head Latent Attention of one layer (LayerSpec::mla), in the absorbed form: the
// cache holds one row per token (the normed latent and the rotated shared RoPE key,
// CpuKvCache::latent_head), never per-head K or V. Each head's nope query is folded into
// latent space through its attn_k_b matrix, so a score is one dot product of that
// (kv_lora_rank + qk_rope_head_dim) query with a cached row; the softmax-weighted sum of the
// rows' latents then goes through the head's attn_v_b to its value. Every projection is a
// kernels::matmul over the weights' packed layouts; the dot products over cached rows are the
// kernels' vectorized ones.
//
// Batch invariance: a row's scores, softmax and sums depend only on its own query and its
// sequence's cached rows, read back from the cache in position order, and the per-head matmuls
// give each row the result it would have alone (kernels/matmul.h).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/kv_storage.h"
#include "base/thread_pool.h"
#include "model/batch.h"
#include "model/config.h"
#include "model/weights.h"

namespace loom {

class CpuMlaAttention {
 public:
  // Sequences with at least `rows` rows in a step take the decompressed path
  // (ModelLoadOptions::mla_decompress_rows; 0: never). Needs the weights as loaded, before
  // their kernel-ready repacking: each head's attn_k_b is kept transposed in F32 for it.
  void enable_decompress(int32_t rows, const ModelConfig& c, const Weights& w);

  // xn: the n rows of the normed attention input (n_embd each). rope_cs: row i's RoPE angles
  // at rope_cs + i * cs_stride (cos then sin, qk_rope_head_dim values). Stores the rows' latents
  // in `kv` (layer, its group's block tables) and returns the heads' values, (n, n_head *
  // v_head_dim), valid until the next call.
  const float* run(const ModelConfig& c, const LayerWeights& L, int layer, const Batch& b,
                   CpuKvCache& kv, int kv_group, const float* xn, const float* rope_cs,
                   int64_t cs_stride, float scale, ThreadPool& pool);

  // Bytes of scratch held now (the decompressed path's included), and what a step of `rows`
  // tokens over at most max_kv positions allocates (for the memory plan; keep in step with
  // run(); the plan leaves out the decompressed path, a test-only option: mla_decompress_rows).
  uint64_t scratch_bytes() const;
  static uint64_t scratch_bytes_for(const ModelConfig& c, int64_t rows, int32_t max_kv,
                                    int n_threads);

 private:
  // The decompressed form for the rows of sequence `seq` (which must have them): per head,
  // K_nope = W_UK · latent and V = attn_v_b · latent for every cached row, then attention
  // with the full queries; writes the rows' heads to out_.
  void attend_decompressed(const ModelConfig& c, const LayerWeights& L, int layer, const Batch& b,
                           const kernels::PagedHead& rows, int32_t seq, float scale,
                           ThreadPool& pool);
  // Attention of row `i` for heads [h0, h1) over its sequence's cached rows.
  void attend(const ModelConfig& c, const kernels::PagedHead& rows, int64_t i, int32_t n_kv,
              int64_t h0, int64_t h1, float scale, int thread);

  std::vector<float> qa_;    // (n, q_lora_rank) the low-rank query, normed in place
  std::vector<float> q_;     // (n, n_head * (N + P)) queries, rope parts rotated
  std::vector<float> kva_;   // (n, R + P) kv_a projection, then the row the cache keeps
  std::vector<float> qcat_;  // (n, n_head, R + P) absorbed queries: [k_b · q_nope ; q_rope]
  std::vector<float> lat_;   // (n, n_head, R) each head's softmax-weighted sum of latents
  std::vector<float> out_;   // (n, n_head * Dv) the heads' values
  // Per thread: gathered rows in and out of a per-head matmul, a task's scores and one cached
  // row as floats.
  struct Scratch {
    std::vector<float> in, out, scores, row;
  };
  static void grow_scores(Scratch& s, int64_t heads, int64_t n_kv);
  std::vector<Scratch> scratch_;
  // Decompressed path: the threshold, each layer's per-head W_UK (N, R) in F32 (attn_k_b
  // transposed) and their views, the sequence's cached latents (n_kv, R) and RoPE keys
  // (n_kv, P) as floats, and which rows take the path.
  int32_t decompress_rows_ = 0;
  std::vector<std::vector<float>> w_uk_;
  std::vector<std::vector<TensorView>> w_uk_views_;
  std::vector<float> latents_, rope_keys_;
  std::vector<char> row_decompressed_;
};

}  // namespace loom
