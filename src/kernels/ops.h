// Element-wise and attention ops of the transformer forward pass on the CPU: RMSNorm, RoPE,
// softmax, SwiGLU, paged attention over one head, and K/V storage conversion. Each has a
// scalar double-accumulating twin in kernels/ref/ops_ref.h that tests compare against.
//
// Every reduction here runs in an order fixed by the vector length alone (never by the batch
// size or thread count), so a token's result is bit-identical whichever batch it is in.
#pragma once

#include <cmath>
#include <cstdint>

#include "format/dtype.h"

namespace loom::kernels {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]. out may alias x.
void rms_norm(const float* x, const float* w, float* out, int64_t n, float eps);

// cos/sin of RoPE pair i (i < head_dim / 2) at position pos, as rope() uses them.
void rope_angles(int32_t pos, const float* inv_freq, int64_t half, float* cos_out, float* sin_out);
// rope() with the angles already computed (the forward pass computes them once per row for
// all layers).
void rope_rotate(float* x, int64_t n_heads, int64_t head_dim, const float* cs, const float* sn,
                 bool neox);

// Rotates n_heads consecutive heads of head_dim floats in place for position pos.
// inv_freq[i] (i < head_dim/2) is the angular frequency of pair i (any scaling already folded
// in). neox: pairs are (i, i + head_dim/2) ("halves", HF layout); otherwise (2i, 2i+1).
void rope(float* x, int64_t n_heads, int64_t head_dim, int32_t pos, const float* inv_freq,
          bool neox);

// The dot product and y += a·x the ops here use (vectorized, fixed summation order), for
// callers outside the kernels (Multi-head Latent Attention over its cached rows).
float vec_dot(const float* a, const float* b, int64_t n);
void vec_axpy(float a, const float* x, float* y, int64_t n);

// In-place softmax over n values.
void softmax(float* x, int64_t n);

// out[i] = silu(gate[i]) * up[i]. out may alias gate or up.
void silu_mul(const float* gate, const float* up, float* out, int64_t n);

// Converts n floats to K/V storage (kF32, kF16 or kBF16) and back.
void store_kv(Dtype dtype, const float* src, void* dst, int64_t n);
// store_kv with `stride` bytes between the stored values (a dim-major K token).
void store_kv_strided(Dtype dtype, const float* src, void* dst, int64_t n, uint64_t stride);
void load_kv(Dtype dtype, const void* src, float* dst, int64_t n);

// K or V of one KV head of one sequence in a paged cache. Dimension d of token j lives at
// base + block_table[j / block_size] * block_stride + (j % block_size) * token_stride
//      + d * dim_bytes(),
// as a value of `dtype`. Row layout (dim_stride 0): a token's head_dim values are adjacent.
// Dim-major (token_stride = one value, dim_stride = block_size values): the block's tokens of
// one dimension are adjacent, as the CPU cache keeps K (backend/cpu/kv_storage.h).
struct PagedHead {
  const uint8_t* base = nullptr;
  Dtype dtype = Dtype::kF32;
  const int32_t* block_table = nullptr;
  int32_t block_size = 0;
  uint64_t block_stride = 0;  // bytes
  uint64_t token_stride = 0;  // bytes
  uint64_t dim_stride = 0;    // bytes; 0: adjacent (the element size)
  uint64_t dim_bytes() const { return dim_stride ? dim_stride : dtype == Dtype::kF32 ? 4 : 2; }
  bool row_layout() const { return dim_bytes() == (dtype == Dtype::kF32 ? 4u : 2u); }
  const uint8_t* token(int32_t j) const {  // dimension 0 of token j
    return base + static_cast<uint64_t>(block_table[j / block_size]) * block_stride +
           static_cast<uint64_t>(j % block_size) * token_stride;
  }
  const uint8_t* at(int32_t j, int64_t d) const { return token(j) + d * dim_bytes(); }
};

// Causal attention of one query head over tokens [kv_begin, n_kv) (kv_begin > 0: a sliding
// window): out = sum_j softmax_j(s_j) v_j with s_j = scale * q·k_j, or
// softcap * tanh(scale * q·k_j / softcap) when softcap > 0 (see kernels/attention.h).
// sink > -inf: one more softmax term with no value (attention sinks, kernels/attention.h).
// scratch must hold n_kv + head_dim floats.
void attention(const float* q, const PagedHead& k, const PagedHead& v, int64_t head_dim,
               int32_t n_kv, float scale, float* scratch, float* out, int32_t kv_begin = 0,
               float softcap = 0.0f, float sink = -INFINITY);

}  // namespace loom::kernels
