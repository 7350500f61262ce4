// The tensor plan: every tensor a model of a given ModelConfig has — GGUF name, shape, what
// it is and where it binds — derived from the config's flags alone (norm placement, fused
// projections, biases, q/k norms, tied embeddings). Weights binding, synth, convert and
// quantize all read it, so nothing about an architecture's tensors is written twice.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace loom {

enum class TensorKind { kMatrix, kNorm, kBias, kRopeFreqs };

// Which Weights / LayerWeights member a tensor binds to.
enum class TensorRole {
  kTokenEmbd,
  kOutputNorm,
  kOutput,
  kRopeFreqs,
  kRopeFactorsShort,
  kRopeFactorsLong,
  kAttnNorm,
  kWq,
  kWk,
  kWv,
  kWqkv,
  kBq,
  kBk,
  kBv,
  kQNorm,
  kKNorm,
  kWo,
  kAttnPostNorm,
  kFfnNorm,
  kWGate,
  kWUp,
  kWGateUp,
  kWDown,
  kFfnPostNorm,
  // Mixture of Experts: the router, the experts stacked in 3-D tensors (one matrix per
  // expert), the shared expert and its gate.
  kRouter,
  kGateExps,
  kUpExps,
  kDownExps,
  kGateUpExps,  // gate then up rows of each expert (MoeConfig::fused_gate_up)
  kShexpGate,
  kWGateShexp,
  kWUpShexp,
  kWDownShexp,
  // gpt-oss: the output projection's bias, attention sinks, router and expert biases ({F, X}
  // and {E, X}: one row per expert).
  kBo,
  kSinks,
  kRouterBias,
  kGateExpsBias,
  kUpExpsBias,
  kDownExpsBias,
  // A classifier head on the pooled hidden state (rerankers converted by llama.cpp).
  kClsOut,
  kClsOutBias,
  // Multi-head Latent Attention (LayerSpec::mla) and DeepSeek's router bias: the low-rank
  // query path, the latent's projection and norm, the per-head key/value up-projections
  // ({N, R, H} and {R, Dv, H}: one matrix per head, bound like experts).
  kWqA,
  kQANorm,
  kWqB,
  kWkvA,
  kKvANorm,
  kWkB,
  kWvB,
  kExpProbsB,
  // Gated DeltaNet (LayerSpec::deltanet): the convolution's input (q, k, v), the output gate
  // z, b and a (fused in Qwen3-Next's ssm_ba), the convolution's taps, -exp(A_log), dt_bias,
  // the gated norm's weight and the output projection.
  kSsmQkv,
  kSsmZ,
  kSsmBa,
  kSsmBeta,
  kSsmAlpha,
  kSsmConv,
  kSsmA,
  kSsmDt,
  kSsmNorm,
  kSsmOut,
  // Multi-token prediction modules (ModelConfig::n_mtp_layers; layer = n_layer + i): the
  // input projection and its two norms, the head's norm, and the optional own head and
  // embedding.
  kMtpEhProj,
  kMtpEnorm,
  kMtpHnorm,
  kMtpHeadNorm,
  kMtpHead,
  kMtpEmbed,
};

struct PlannedWeight {
  std::string name;         // GGUF name ("blk.3.attn_q.weight")
  std::vector<int64_t> ne;  // ggml order: {cols, rows} for matrices, {cols, rows, n_expert}
  TensorKind kind;
  TensorRole role;
  int32_t layer = -1;  // -1: a global tensor; >= n_layer: MTP module layer - n_layer
};

struct TensorPlanOptions {
  bool rope_freqs = false;  // include rope_freqs.weight (n_rot/2 divisors)
};
// LongRoPE configs (RopeScalingType::kLongRope) always plan rope_factors_{long,short}.weight.

// In llama.cpp's file order: token_embd, rope_freqs, each layer's (the MTP modules' blocks
// last), output_norm, output.
std::vector<PlannedWeight> tensor_plan(const ModelConfig& c, const TensorPlanOptions& o = {});

}  // namespace loom
