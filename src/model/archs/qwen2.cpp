// Qwen2 / Qwen2.5: Llama's block with biases on q, k and v.
#include "model/archs/archs.h"

namespace loom::archs {

const ArchSpec kQwen2 = {
    .name = "qwen2",
    .hf_model_types = {"qwen2"},
    .gguf_rope_style = RopeStyle::kNeox,
    .qkv_bias = TensorNeed::kRequired,
    .qk_norm = TensorNeed::kAbsent,
    .layer_tensors = kLlamaLayerTensors,
    .defaults = {.qkv_bias = true,
                 .qk_norm = false,
                 .rope_theta = 1e6f,
                 .rms_eps = 1e-6f,
                 .tied_embeddings = false},
};

}  // namespace loom::archs
