// Llama (and Mistral, whose checkpoints are llama-shaped: GGUF files say "llama"). Sliding-
// window attention is read where a Mistral config sets it. Mixtral is Llama with a Mixture of
// Experts FFN (softmax over the top-k router logits): llama.cpp stores it as "llama" with
// llama.expert_count.
#include "model/archs/archs.h"

namespace loom::archs {

static Status read_llama_hf(const nlohmann::json& j, ModelConfig& c) {
  LOOM_RETURN_IF_ERROR(hf_sliding_layers(j, c, 0));
  return hf_moe(j, c, /*norm_default=*/true);
}
static Status read_llama_gguf(const GgufFile& f, ModelConfig& c) {
  return gguf_moe(f, c, {});
}
static Status write_llama_gguf(GgufWriter& w, const ModelConfig& c) {
  return gguf_write_moe(w, c, /*norm_default=*/true);
}

const ArchSpec kLlama = {
    .name = "llama",
    .hf_model_types = {"llama", "mistral", "mixtral"},
    .gguf_rope_style = RopeStyle::kInterleaved,
    .qkv_bias = TensorNeed::kOptional,
    .qk_norm = TensorNeed::kAbsent,
    .layer_tensors = kMixtralLayerTensors,
    .read_hf = read_llama_hf,
    .read_gguf = read_llama_gguf,
    .write_gguf = write_llama_gguf,
    .defaults = {.qkv_bias = false,
                 .qk_norm = false,
                 .rope_theta = 10000.0f,
                 .rms_eps = 1e-5f,
                 .tied_embeddings = false},
};

}  // namespace loom::archs
