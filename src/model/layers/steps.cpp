#include "model/layers/steps.h"

#include <algorithm>
#include <cmath>

#include "kernels/activation.h"
#include "kernels/ops.h"

namespace loom::layers {

void block_input(const ModelConfig& c, const float* x, const std::vector<float>& norm, float* out) {
  if (c.norm_placement != NormPlacement::kPost)
    kernels::rms_norm(x, norm.data(), out, c.n_embd, c.rms_eps);
  else
    std::copy(x, x + c.n_embd, out);
}

void add_block_output(const ModelConfig& c, float* x, float* p,
                      const std::vector<float>& post_norm) {
  const int64_t E = c.n_embd;
  if (!post_norm.empty()) kernels::rms_norm(p, post_norm.data(), p, E, c.rms_eps);
  if (c.residual_scale != 1.0f)
    for (int64_t j = 0; j < E; ++j) x[j] += c.residual_scale * p[j];
  else
    for (int64_t j = 0; j < E; ++j) x[j] += p[j];
}

void scale_embedding(const ModelConfig& c, float* x) {
  if (c.embd_scale == 1.0f) return;
  for (int64_t j = 0; j < c.n_embd; ++j) x[j] *= c.embd_scale;
}

void mtp_input(const ModelConfig& c, const MtpWeights& m, const float* hidden, bool first_position,
               float* row) {
  const int64_t E = c.n_embd;
  if (first_position && c.mtp_zero_embedding_at_start)
    std::fill_n(row, E, 0.0f);  // RMSNorm of zeros is zeros
  else
    kernels::rms_norm(row, m.enorm.data(), row, E, c.rms_eps);
  kernels::rms_norm(hidden, m.hnorm.data(), row + E, E, c.rms_eps);
}

void split_query_gate(const ModelConfig& c, const float* qg, float* q, float* gate) {
  const int64_t D = c.head_dim;
  for (int64_t h = 0; h < c.n_head; ++h) {
    std::copy_n(qg + h * 2 * D, D, q + h * D);
    std::copy_n(qg + h * 2 * D + D, D, gate + h * D);
  }
}

void apply_output_gate(float* attn, const float* gate, int64_t n) {
  for (int64_t i = 0; i < n; ++i) attn[i] *= 1.0f / (1.0f + std::exp(-gate[i]));
}

void prepare_qkv(const ModelConfig& c, const LayerWeights& L, float* q, float* k, float* v,
                 const float* cs, bool rope) {
  const int64_t D = c.head_dim, q_dim = c.n_head * D, kv_dim = c.n_head_kv * D;
  if (c.qkv_bias) {
    for (int64_t j = 0; j < q_dim; ++j) q[j] += L.bq[j];
    for (int64_t j = 0; j < kv_dim; ++j) k[j] += L.bk[j];
    for (int64_t j = 0; j < kv_dim; ++j) v[j] += L.bv[j];
  }
  if (c.qk_norm && c.qk_norm_kind == QkNorm::kWhole) {
    kernels::rms_norm(q, L.q_norm.data(), q, q_dim, c.rms_eps);
    kernels::rms_norm(k, L.k_norm.data(), k, kv_dim, c.rms_eps);
  } else if (c.qk_norm) {
    for (int64_t h = 0; h < c.n_head; ++h)
      kernels::rms_norm(q + h * D, L.q_norm.data(), q + h * D, D, c.rms_eps);
    for (int64_t h = 0; h < c.n_head_kv; ++h)
      kernels::rms_norm(k + h * D, L.k_norm.data(), k + h * D, D, c.rms_eps);
  }
  if (!rope) return;
  const bool neox = c.rope_style == RopeStyle::kNeox;
  const int64_t R = c.n_rot > 0 ? c.n_rot : D;
  if (R == D) {
    kernels::rope_rotate(q, c.n_head, D, cs, cs + D / 2, neox);
    kernels::rope_rotate(k, c.n_head_kv, D, cs, cs + D / 2, neox);
  } else {
    kernels::rope_rotate_partial(q, c.n_head, D, R, cs, cs + R / 2, neox);
    kernels::rope_rotate_partial(k, c.n_head_kv, D, R, cs, cs + R / 2, neox);
  }
}

void gated_activation(const ModelConfig& c, float* gate, const float* up, int64_t n) {
  if (c.activation == Activation::kSwigluOai) {
    // transformers' GptOssExperts: alpha 1.702, limit 7 (constants of the model, not config).
    constexpr float kAlpha = 1.702f, kLimit = 7.0f;
    for (int64_t j = 0; j < n; ++j) {
      const float g = std::min(gate[j], kLimit);
      const float u = std::clamp(up[j], -kLimit, kLimit);
      gate[j] = g / (1.0f + std::exp(-kAlpha * g)) * (u + 1.0f);
    }
    return;
  }
  if (c.activation == Activation::kGeluTanh)
    kernels::gelu_tanh_mul(gate, up, gate, n);
  else
    kernels::silu_mul(gate, up, gate, n);
}

void add_bias(float* x, const float* b, int64_t n) {
  for (int64_t j = 0; j < n; ++j) x[j] += b[j];
}

void finish_logits(const ModelConfig& c, float* logits) {
  const int64_t V = c.n_vocab;
  if (c.logit_scale != 1.0f)
    for (int64_t j = 0; j < V; ++j) logits[j] /= c.logit_scale;
  if (c.final_softcap > 0) kernels::softcap(logits, V, c.final_softcap);
}

}  // namespace loom::layers
