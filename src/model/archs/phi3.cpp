// Phi-3 / Phi-4 (mini): Llama's block with q, k and v in one fused projection and gate and up
// in another (bound as row ranges of the fused matrices), partial rotary where
// partial_rotary_factor < 1.
#include "model/archs/archs.h"
#include "model/tensor_names.h"

namespace loom::archs {
namespace {

constexpr LayerTensorName kPhi3Names[] = {
    {"input_layernorm.weight", names::kAttnNorm},
    {"self_attn.qkv_proj.weight", names::kAttnQkv},
    {"self_attn.o_proj.weight", names::kAttnOutput},
    {"post_attention_layernorm.weight", names::kFfnNorm},
    {"mlp.gate_up_proj.weight", names::kFfnUp},
    {"mlp.down_proj.weight", names::kFfnDown},
};

Status read_phi3_hf(const nlohmann::json& j, ModelConfig& c) {
  c.fused_qkv = true;
  c.fused_gate_up = true;
  return hf_sliding_layers(j, c, 0);
}

Status read_phi3_gguf(const GgufFile& f, ModelConfig& c) {
  c.fused_qkv = true;
  c.fused_gate_up = true;
  LOOM_ASSIGN_OR_RETURN(const int32_t window, gguf_sliding_window(f, c));
  for (LayerSpec& s : c.layers) s.window = window;
  return Status::ok();
}

bool every_layer(int, int) {
  return true;
}

Status write_phi3_gguf(GgufWriter& w, const ModelConfig& c) {
  LOOM_ASSIGN_OR_RETURN(int32_t window, gguf_window(c, every_layer));
  if (window > 0) gguf_set_u32(w, c, names::kSlidingWindow, window);
  return Status::ok();
}

}  // namespace

const ArchSpec kPhi3 = {
    .name = "phi3",
    .hf_model_types = {"phi3"},
    .gguf_rope_style = RopeStyle::kNeox,
    .qkv_bias = TensorNeed::kAbsent,
    .qk_norm = TensorNeed::kAbsent,
    .layer_tensors = kPhi3Names,
    .read_hf = read_phi3_hf,
    .read_gguf = read_phi3_gguf,
    .write_gguf = write_phi3_gguf,
    .defaults = {.qkv_bias = false,
                 .qk_norm = false,
                 .rope_theta = 10000.0f,
                 .rms_eps = 1e-5f,
                 .tied_embeddings = false},
};

}  // namespace loom::archs
