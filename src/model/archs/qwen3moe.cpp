// Qwen3-MoE: Qwen3's attention (per-head q/k norms) with a Mixture-of-Experts FFN: a softmax
// router over n_expert experts, the top n_expert_used per token, their probabilities
// renormalized (norm_topk_prob; llama.cpp's qwen3moe always renormalizes).
#include "model/archs/archs.h"

namespace loom::archs {
namespace {

// A config.json without norm_topk_prob: Qwen3MoeConfig's default, false (every released
// checkpoint sets it true). GGUF files: llama.cpp's qwen3moe always renormalizes.
Status read_hf(const nlohmann::json& j, ModelConfig& c) {
  return hf_moe(j, c, /*norm_default=*/false, /*required=*/true);
}
Status read_gguf(const GgufFile& f, ModelConfig& c) {
  return gguf_moe(f, c,
                  {.norm_default = true,
                   .required = true,
                   .ff_exp_per_used = true,
                   .shared = GgufMoe::Shared::kNone});
}
Status write_gguf(GgufWriter& w, const ModelConfig& c) {
  return gguf_write_moe(w, c, /*norm_default=*/true);
}

}  // namespace

const ArchSpec kQwen3Moe = {
    .name = "qwen3moe",
    .hf_model_types = {"qwen3_moe"},
    .gguf_rope_style = RopeStyle::kNeox,
    .qkv_bias = TensorNeed::kOptional,
    .qk_norm = TensorNeed::kRequired,
    .layer_tensors = kQwenMoeLayerTensors,
    .read_hf = read_hf,
    .read_gguf = read_gguf,
    .write_gguf = write_gguf,
    .defaults = {.qkv_bias = false,
                 .qk_norm = true,
                 .rope_theta = 1e6f,
                 .rms_eps = 1e-6f,
                 .tied_embeddings = false},
};

}  // namespace loom::archs
