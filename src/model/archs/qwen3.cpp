// Qwen3: Llama's block with an RMSNorm on q and k per head before RoPE; head_dim may differ
// from n_embd / n_head.
#include "model/archs/archs.h"

namespace loom::archs {

const ArchSpec kQwen3 = {
    .name = "qwen3",
    .hf_model_types = {"qwen3"},
    .gguf_rope_style = RopeStyle::kNeox,
    .qkv_bias = TensorNeed::kOptional,
    .qk_norm = TensorNeed::kRequired,
    .layer_tensors = kLlamaLayerTensors,
    .defaults = {.qkv_bias = false,
                 .qk_norm = true,
                 .rope_theta = 1e6f,
                 .rms_eps = 1e-6f,
                 .tied_embeddings = true},
};

}  // namespace loom::archs
