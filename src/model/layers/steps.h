// The layer math of a decoder block as named steps over one token's row, backend-neutral:
// what differs between architectures is decided by ModelConfig and LayerSpec here, never by
// an architecture's name. A backend runs them in its own order and parallel split (the CPU
// forward pass fuses them into its matmuls' activation passes, backend/cpu/cpu_model.cpp);
// they are the one definition of the math. Each names the activation it produces, as a debug
// dump would.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/weights.h"

namespace loom::layers {

// "block_in": a sub-block's input from the residual stream x (E floats): RMSNorm(x, norm)
// where the architecture norms before blocks, x itself where it norms only after (OLMo 2).
void block_input(const ModelConfig& c, const float* x, const std::vector<float>& norm, float* out);

// "residual": x += residual_scale · post_norm(p), the norm only where the architecture puts
// one after the block (Gemma, OLMo 2). p (E floats, the block's output) is overwritten.
void add_block_output(const ModelConfig& c, float* x, float* p,
                      const std::vector<float>& post_norm);

// "embd": the token's embedding row (already dequantized into x) scaled as the architecture
// says (Gemma √n_embd, Granite's embedding_multiplier).
void scale_embedding(const ModelConfig& c, float* x);

// "mtp_in": a multi-token prediction module's input row (2E floats, the input of its
// eh_proj): [enorm(embedding), hnorm(hidden)], the token's embedding already dequantized into
// row[0, E) and zeroed at position 0 where the config says so (mtp_zero_embedding_at_start,
// as vLLM's DeepSeek MTP), the main model's hidden state before its final norm from `hidden`.
void mtp_input(const ModelConfig& c, const MtpWeights& m, const float* hidden, bool first_position,
               float* row);

// "qk": one token's q (n_head·D), k and v (n_head_kv·D) after their projections: biases,
// q/k RMSNorm per head or over the whole projection, then RoPE over the first n_rot
// dimensions of each head with the angles cs[0, n_rot/2) / cs[n_rot/2, n_rot) (rope: false
// for a layer without RoPE).
void prepare_qkv(const ModelConfig& c, const LayerWeights& L, float* q, float* k, float* v,
                 const float* cs, bool rope);

// "q_gate": with ModelConfig::attn_output_gate, attn_q's row holds per head the query's D
// values then its gate's: split into q and gate (n_head·D each).
void split_query_gate(const ModelConfig& c, const float* qg, float* q, float* gate);

// "attn_gated": the attention output (n_head·D) times sigmoid(gate), before wo.
void apply_output_gate(float* attn, const float* gate, int64_t n);

// "ffn_act": gate ← act(gate) · up over n (the gated FFN's activation, SiLU or GELU-tanh;
// gpt-oss's clamped variant, Activation::kSwigluOai).
void gated_activation(const ModelConfig& c, float* gate, const float* up, int64_t n);

// "bias": x += b over b's length (nothing when b is empty): gpt-oss's output-projection and
// expert biases.
void add_bias(float* x, const float* b, int64_t n);

// "logits": one row of n_vocab logits divided by logit_scale and soft-capped where set.
void finish_logits(const ModelConfig& c, float* logits);

// The window start for a token at `pos` in a layer (0: attends from the first token).
inline int32_t window_begin(const LayerSpec& s, int32_t pos) {
  return s.window > 0 && pos + 1 > s.window ? pos + 1 - s.window : 0;
}

}  // namespace loom::layers
