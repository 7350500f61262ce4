// Scalar ground truth for the Gated DeltaNet step (backend/cpu/gated_deltanet.h): the plain
// token-by-token recurrence of Hugging Face's torch_recurrent_gated_delta_rule with the
// convolution before it and the gated RMSNorm after it, one sequence from a zero state, state
// and sums in double. Tests compare the chunked, batch-invariant step against it.
#pragma once

#include <cstdint>

namespace loom::kernels::ref {

struct GatedDeltaParams {
  int32_t n_k_heads = 0, n_v_heads = 0, d_k = 0, d_v = 0, conv_kernel = 0;
  const float* conv = nullptr;  // (conv_dim, conv_kernel): channel c's taps, oldest first
  const float* a = nullptr;     // (n_v_heads) -exp(A_log)
  const float* dt = nullptr;    // (n_v_heads) dt_bias
  const float* norm = nullptr;  // (d_v) the gated RMSNorm's weight
  float eps = 1e-6f;            // the gated RMSNorm's epsilon
  int32_t conv_dim() const { return 2 * n_k_heads * d_k + n_v_heads * d_v; }
};

// n tokens of one sequence from a zero state. Per token: qkv (conv_dim, before the
// convolution), z (n_v_heads * d_v), b (n_v_heads), a_in (n_v_heads); out (n_v_heads * d_v).
// state_out, when given, receives the final state (n_v_heads, d_k, d_v).
void gated_delta_net(const GatedDeltaParams& p, int64_t n, const float* qkv, const float* z,
                     const float* b, const float* a_in, float* out, float* state_out = nullptr);

}  // namespace loom::kernels::ref
