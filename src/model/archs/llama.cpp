// Llama (and Mistral, whose checkpoints are llama-shaped: GGUF files say "llama"). Sliding-
// window attention is read where a Mistral config sets it.
#include "model/archs/archs.h"

namespace loom::archs {

static Status read_llama_hf(const nlohmann::json& j, ModelConfig& c) {
  return hf_sliding_layers(j, c, 0);
}

const ArchSpec kLlama = {
    .name = "llama",
    .hf_model_types = {"llama", "mistral"},
    .gguf_rope_style = RopeStyle::kInterleaved,
    .qkv_bias = TensorNeed::kOptional,
    .qk_norm = TensorNeed::kAbsent,
    .layer_tensors = kLlamaLayerTensors,
    .read_hf = read_llama_hf,
    .defaults = {.qkv_bias = false,
                 .qk_norm = false,
                 .rope_theta = 10000.0f,
                 .rms_eps = 1e-5f,
                 .tied_embeddings = false},
};

}  // namespace loom::archs
