// Qwen2-MoE: Qwen2's attention (q/k/v biases) with a Mixture-of-Experts FFN whose top-k
// softmax probabilities are used as they are (norm_topk_prob false), plus a shared expert
// that runs for every token, scaled by sigmoid(x · shared_expert_gate).
#include "model/archs/archs.h"

namespace loom::archs {
namespace {

Status read_hf(const nlohmann::json& j, ModelConfig& c) {
  LOOM_ASSIGN_OR_RETURN(const bool sliding, hf_bool(j, "use_sliding_window", false));
  if (sliding)
    return unsupported("config.json: qwen2_moe with use_sliding_window is not supported");
  return hf_moe(j, c, /*norm_default=*/false, /*required=*/true);
}
Status read_gguf(const GgufFile& f, ModelConfig& c) {
  return gguf_moe(f, c,
                  {.norm_default = false,
                   .required = true,
                   .ff_exp_per_used = true,
                   .shared = GgufMoe::Shared::kGated});
}
Status write_gguf(GgufWriter& w, const ModelConfig& c) {
  return gguf_write_moe(w, c, /*norm_default=*/false);
}

}  // namespace

const ArchSpec kQwen2Moe = {
    .name = "qwen2moe",
    .hf_model_types = {"qwen2_moe"},
    .gguf_rope_style = RopeStyle::kNeox,
    .qkv_bias = TensorNeed::kRequired,
    .qk_norm = TensorNeed::kAbsent,
    .layer_tensors = kQwenMoeLayerTensors,
    .read_hf = read_hf,
    .read_gguf = read_gguf,
    .write_gguf = write_gguf,
    .defaults = {.qkv_bias = true,
                 .qk_norm = false,
                 .rope_theta = 1e6f,
                 .rms_eps = 1e-6f,
                 .tied_embeddings = false},
};

}  // namespace loom::archs
