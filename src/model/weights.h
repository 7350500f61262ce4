// Weights: the model's tensors bound by name and checked against the config. Matrices are
// zero-copy TensorViews into the mapped file (or an owned buffer); small 1-D tensors (norm
// weights, biases, rope frequency factors) are converted to float once at load.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "format/tensor.h"
#include "model/arch.h"
#include "model/config.h"
#include "model/weight_footprint.h"

namespace loom {

// Looks a tensor up by its GGUF name; nullptr when absent.
using TensorLookup = std::function<const TensorView*(std::string_view gguf_name)>;
// A source that holds a layer's experts as one tensor each (a Hugging Face checkpoint): the
// experts of a GGUF name that stacks them ({cols, rows, n_expert}), one {cols, rows} view each
// in expert order, bound in place with no stacked copy; empty for any other name (binding
// then asks the TensorLookup).
using ExpertLookup = std::function<std::vector<const TensorView*>(std::string_view gguf_name)>;

struct LayerWeights {
  std::vector<float> attn_norm;       // (E); empty with post-norms only (OLMo 2)
  TensorView wq;                      // (n_head * D, E)   shapes as (rows, cols)
  TensorView wk;                      // (n_head_kv * D, E)
  TensorView wv;                      // (n_head_kv * D, E)
  std::vector<float> bq, bk, bv;      // (n_head * D), (n_head_kv * D) x2; empty without qkv bias
  std::vector<float> q_norm;          // (D), or (n_head * D) for QkNorm::kWhole; empty without
  std::vector<float> k_norm;          // (D), or (n_head_kv * D)
  TensorView wo;                      // (E, n_head * D)
  std::vector<float> attn_post_norm;  // (E) with NormPlacement kSandwich / kPost
  std::vector<float> ffn_norm;        // (E); empty with post-norms only
  std::vector<float> ffn_post_norm;   // (E) with NormPlacement kSandwich / kPost
  TensorView w_gate;                  // (F, E)
  TensorView w_up;                    // (F, E)
  TensorView w_down;                  // (E, F)
  // Mixture of Experts (LayerSpec::moe), instead of w_gate / w_up / w_down: the router and one
  // view per expert into the stacked tensors, the shared expert and its gate.
  TensorView router;                         // (n_expert, E)
  std::vector<TensorView> gate_exp, up_exp;  // [n_expert] (Fx, E)
  std::vector<TensorView> down_exp;          // [n_expert] (E, Fx)
  TensorView w_gate_shexp, w_up_shexp;       // (Fs, E)
  TensorView w_down_shexp;                   // (E, Fs)
  std::vector<float> shexp_gate;             // (E); empty without a gated shared expert
  // gpt-oss (empty elsewhere): output-projection bias, one sink logit per query head, router
  // bias, and per-expert biases of gate / up (n_expert, Fx) and down (n_expert, E).
  std::vector<float> bo;           // (E)
  std::vector<float> attn_sinks;   // (n_head)
  std::vector<float> router_bias;  // (n_expert)
  std::vector<float> gate_exp_bias, up_exp_bias, down_exp_bias;
  // Multi-head Latent Attention (LayerSpec::mla; R = kv_lora_rank, N = qk_nope_head_dim,
  // P = qk_rope_head_dim, Dv = v_head_dim), instead of wk / wv; wq is the full query
  // projection only without a low-rank query path, wo is (E, n_head * Dv).
  TensorView wq_a;                 // (q_lora_rank, E)
  std::vector<float> q_a_norm;     // (q_lora_rank)
  TensorView wq_b;                 // (n_head * (N + P), q_lora_rank)
  TensorView wkv_a;                // (R + P, E): the latent, then the shared RoPE key
  std::vector<float> kv_a_norm;    // (R)
  std::vector<TensorView> k_b;     // [n_head] (R, N): a head's nope query into latent space
  std::vector<TensorView> v_b;     // [n_head] (Dv, R): latent attention output to its value
  std::vector<float> exp_probs_b;  // (n_expert) DeepSeek's router bias, for choosing only
  // Gated DeltaNet (LayerSpec::deltanet; ModelConfig::deltanet: Hk, Hv heads, dk, dv, kernel K;
  // C = conv_dim()), instead of attention's tensors. Bound in this layout whatever the source
  // (Qwen3-Next's fused in_proj_qkvz is split by its converter, or at load from safetensors),
  // except two things the file decides (DeltaNetConfig): the order of the value heads
  // (v_heads_tiled), and b / a fused in ssm_ba (fused_ba), both regrouped per step by the
  // forward pass (layers/gated_deltanet.h) since a column order cannot be changed in a
  // quantized matrix.
  TensorView ssm_qkv;           // (C, E): every q head, then every k head, then every v head
  TensorView ssm_z;             // (Hv * dv, E): the output gate
  TensorView ssm_beta;          // (Hv, E): b, beta = sigmoid(b)
  TensorView ssm_alpha;         // (Hv, E): a, the decay's input
  TensorView ssm_ba;            // (2 Hv, E) with fused_ba, instead of ssm_beta / ssm_alpha
  std::vector<float> ssm_conv;  // (C, K): channel c's taps, oldest first
  std::vector<float> ssm_a;     // (Hv): -exp(A_log)
  std::vector<float> ssm_dt;    // (Hv): dt_bias
  std::vector<float> ssm_norm;  // (dv): the gated RMSNorm's weight (no 1 + w offset)
  TensorView ssm_out;           // (E, Hv * dv)
};

// One multi-token prediction module (ModelConfig::n_mtp_layers): the input projection of
// [enorm(embedding), hnorm(hidden)], the block, and the head. head_norm, head and embed are
// the model's output_norm, output and token_embd when the file has no own copies.
struct MtpWeights {
  TensorView eh_proj;            // (E, 2E): columns [0, E) the embedding's, [E, 2E) the hidden's
  std::vector<float> enorm;      // (E)
  std::vector<float> hnorm;      // (E)
  std::vector<float> head_norm;  // (E)
  TensorView head;               // (V, E)
  TensorView embed;              // (V, E)
  LayerWeights block;            // ModelConfig::mtp_layers[i]
};

struct Weights {
  TensorView token_embd;            // (V, E), any dtype; rows dequantized on lookup
  std::vector<float> output_norm;   // (E)
  TensorView output;                // (V, E); the same view as token_embd when tied
  std::vector<float> rope_freqs;    // (D/2) frequency divisors; empty when absent
  TensorView cls_out;               // (n_cls_out, E) classifier head; absent (null) without
  std::vector<float> cls_out_bias;  // (n_cls_out); empty without
  std::vector<LayerWeights> layers;
  std::vector<MtpWeights> mtp;            // [n_mtp_layers]; never read by the main forward pass
  std::shared_ptr<const void> keepalive;  // the mapping / buffer the views point into
  // What the loader made in memory (a Hugging Face checkpoint's dequantized FP8, derived
  // tensors such as gpt-oss's transposed experts) can go once a backend has copied it: called with
  // the data pointers of the views it copied (and no longer reads) and of every view it still
  // reads. Null when the views point into a mapping only.
  std::function<void(std::span<const void* const> copied, std::span<const void* const> in_use)>
      release_copied;
  std::function<uint64_t()> loader_made_bytes;  // what that holds now; null as above

  // Binds every tensor the config needs. Fills the tensor-derived config fields: n_vocab
  // (embedding rows), tied_embeddings (no output.weight, or the HF config said so),
  // qkv_bias and qk_norm (per the arch's TensorNeed and what the file holds). A missing
  // required tensor or a wrong shape is an error naming the tensor.
  // norm_plus_one: the source stores RMSNorm weights w of x·(1 + w) (a Gemma HF checkpoint,
  // ArchSpec::hf_norm_plus_one); they are bound as 1 + w, as GGUF files store them. Fused
  // projections (ModelConfig::fused_qkv / fused_gate_up) are bound as row ranges. experts:
  // where the source holds one tensor per expert (ExpertLookup), those views are bound.
  static Result<Weights> bind(ModelConfig& config, const ArchSpec& arch, const TensorLookup& find,
                              bool norm_plus_one = false, const ExpertLookup& experts = {});

  // Every tensor as loaded (the whole model, a MoE model's every expert, multi-token
  // prediction modules included) and what one token of the main forward pass reads (one
  // embedding row, n_expert_used of each MoE layer's experts, all the rest): the definition
  // `loom inspect` applies to a file (model/weight_footprint.h).
  WeightFootprint footprint(int32_t n_expert_used) const;
  uint64_t bytes_per_token(int32_t n_expert_used = 0) const;  // footprint().active_bytes
  uint64_t total_bytes() const;                               // footprint().bytes
  uint64_t total_params() const;
  uint64_t active_params(int32_t n_expert_used) const;
};

}  // namespace loom
