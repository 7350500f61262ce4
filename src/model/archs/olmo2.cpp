// OLMo 2: RMSNorms after attention and after the FFN (not before), and q/k norms over the
// whole projection (all heads at once) before RoPE.
#include "model/archs/archs.h"
#include "model/tensor_names.h"

namespace loom::archs {
namespace {

constexpr LayerTensorName kOlmo2Names[] = {
    {"self_attn.q_proj.weight", names::kAttnQ},
    {"self_attn.k_proj.weight", names::kAttnK},
    {"self_attn.v_proj.weight", names::kAttnV},
    {"self_attn.q_norm.weight", names::kAttnQNorm},
    {"self_attn.k_norm.weight", names::kAttnKNorm},
    {"self_attn.o_proj.weight", names::kAttnOutput},
    {"post_attention_layernorm.weight", names::kAttnPostNorm},
    {"post_feedforward_layernorm.weight", names::kFfnPostNorm},
    {"mlp.gate_proj.weight", names::kFfnGate},
    {"mlp.up_proj.weight", names::kFfnUp},
    {"mlp.down_proj.weight", names::kFfnDown},
};

Status olmo2_flags(ModelConfig& c) {
  c.norm_placement = NormPlacement::kPost;
  c.qk_norm_kind = QkNorm::kWhole;
  return Status::ok();
}
Status read_olmo2_hf(const nlohmann::json&, ModelConfig& c) {
  return olmo2_flags(c);
}
Status read_olmo2_gguf(const GgufFile&, ModelConfig& c) {
  return olmo2_flags(c);
}

}  // namespace

const ArchSpec kOlmo2 = {
    .name = "olmo2",
    .hf_model_types = {"olmo2"},
    .gguf_rope_style = RopeStyle::kNeox,
    .qkv_bias = TensorNeed::kAbsent,
    .qk_norm = TensorNeed::kRequired,
    .layer_tensors = kOlmo2Names,
    .read_hf = read_olmo2_hf,
    .read_gguf = read_olmo2_gguf,
    .defaults = {.qkv_bias = false,
                 .qk_norm = true,
                 .rope_theta = 500000.0f,
                 .rms_eps = 1e-6f,
                 .tied_embeddings = false},
};

}  // namespace loom::archs
