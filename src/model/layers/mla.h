// "mla": the row steps of Multi-head Latent Attention (DeepSeek-V2/V3), backend-neutral. A
// token's kv_a projection (kv_lora_rank latent values, then qk_rope_head_dim of a RoPE key
// shared by every head) becomes the one row the cache keeps; each head's query is
// qk_nope_head_dim values matched against the latent through that head's attn_k_b, then
// qk_rope_head_dim rotated values matched against the shared key. The backend runs the
// projections and the attention over the cached rows (backend/cpu/mla_attention.h).
#pragma once

#include "model/config.h"
#include "model/weights.h"

namespace loom::layers {

// "mla_latent": row (R + P floats) ← [RMSNorm(kv_a[0, R), kv_a_norm) ; RoPE(kv_a[R, R + P))]
// with the angles cs[0, P/2) / cs[P/2, P). row may alias kv_a.
void mla_latent_row(const ModelConfig& c, const LayerWeights& L, const float* kv_a, const float* cs,
                    float* row);

// "mla_q_rope": rotates the last P values of each of the n_head query heads (N + P each).
void mla_rope_query(const ModelConfig& c, float* q, const float* cs);

}  // namespace loom::layers
