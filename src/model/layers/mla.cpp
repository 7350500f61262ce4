#include "model/layers/mla.h"

#include <algorithm>

#include "kernels/ops.h"

namespace loom::layers {

void mla_latent_row(const ModelConfig& c, const LayerWeights& L, const float* kv_a, const float* cs,
                    float* row) {
  const int64_t R = c.mla.kv_lora_rank, P = c.mla.qk_rope_head_dim;
  kernels::rms_norm(kv_a, L.kv_a_norm.data(), row, R, c.rms_eps);
  if (row != kv_a) std::copy(kv_a + R, kv_a + R + P, row + R);
  kernels::rope_rotate(row + R, 1, P, cs, cs + P / 2, c.rope_style == RopeStyle::kNeox);
}

void mla_rope_query(const ModelConfig& c, float* q, const float* cs) {
  const int64_t N = c.mla.qk_nope_head_dim, P = c.mla.qk_rope_head_dim;
  const bool neox = c.rope_style == RopeStyle::kNeox;
  for (int64_t h = 0; h < c.n_head; ++h)
    kernels::rope_rotate(q + h * (N + P) + N, 1, P, cs, cs + P / 2, neox);
}

}  // namespace loom::layers
