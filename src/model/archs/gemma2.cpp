// Gemma 2: embeddings scaled by √n_embd, (1 + w) RMSNorms before and after attention and the
// FFN, GELU-tanh gated FFN, attention and final logit soft-capping, softmax scale
// 1/√query_pre_attn_scalar, sliding-window and global layers alternating (even layers local).
#include <cmath>

#include "model/archs/archs.h"
#include "model/tensor_names.h"

namespace loom::archs {

// What Gemma 2 and 3 share, from either format.
void gemma_common(ModelConfig& c) {
  c.activation = Activation::kGeluTanh;
  c.norm_placement = NormPlacement::kSandwich;
  c.embd_scale = std::sqrt(static_cast<float>(c.n_embd));
}

Status gemma_hf_scale(const nlohmann::json& j, ModelConfig& c) {
  LOOM_ASSIGN_OR_RETURN(auto scalar, hf_number(j, "query_pre_attn_scalar"));
  if (scalar) {
    if (!(*scalar > 0)) return invalid_file("config.json: \"query_pre_attn_scalar\" must be > 0");
    c.attn_scale = static_cast<float>(1.0 / std::sqrt(*scalar));
  }
  return Status::ok();
}

static Status read_gemma2_hf(const nlohmann::json& j, ModelConfig& c) {
  gemma_common(c);
  LOOM_RETURN_IF_ERROR(gemma_hf_scale(j, c));
  LOOM_ASSIGN_OR_RETURN(auto attn_cap, hf_number(j, "attn_logit_softcapping"));
  LOOM_ASSIGN_OR_RETURN(auto final_cap, hf_number(j, "final_logit_softcapping"));
  c.attn_softcap = static_cast<float>(attn_cap.value_or(0));
  c.final_softcap = static_cast<float>(final_cap.value_or(0));
  return hf_sliding_layers(j, c, 2);
}

static Status read_gemma2_gguf(const GgufFile& f, ModelConfig& c) {
  gemma_common(c);
  c.attn_softcap = static_cast<float>(gguf_float(f, c, names::kAttnLogitSoftcap).value_or(0));
  c.final_softcap = static_cast<float>(gguf_float(f, c, names::kFinalLogitSoftcap).value_or(0));
  LOOM_ASSIGN_OR_RETURN(const int32_t window, gguf_sliding_window(f, c));
  for (int l = 0; l < c.n_layer; l += 2) c.layers[l].window = window;
  // GGUF has no key for query_pre_attn_scalar: llama.cpp takes n_embd / n_head for the 27B
  // model (46 layers) and head_dim otherwise, as the released checkpoints set it.
  if (c.n_layer == 46) c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_head));
  return Status::ok();
}

static bool even_layers_slide(int l, int) {
  return l % 2 == 0;
}

static Status write_gemma2_gguf(GgufWriter& w, const ModelConfig& c) {
  LOOM_ASSIGN_OR_RETURN(int32_t window, gguf_window(c, even_layers_slide));
  if (window > 0) gguf_set_u32(w, c, names::kSlidingWindow, window);
  if (c.attn_softcap > 0) gguf_set_f32(w, c, names::kAttnLogitSoftcap, c.attn_softcap);
  if (c.final_softcap > 0) gguf_set_f32(w, c, names::kFinalLogitSoftcap, c.final_softcap);
  const float implied =
      1.0f / std::sqrt(static_cast<float>(c.n_layer == 46 ? c.n_embd / c.n_head : c.head_dim));
  if (c.attn_scale > 0 && std::fabs(c.attn_scale - implied) > 1e-6f * implied)
    return unsupported(
        "convert: gemma2's query_pre_attn_scalar differs from what its GGUF "
        "files imply (head_dim)");
  return Status::ok();
}

const ArchSpec kGemma2 = {
    .name = "gemma2",
    .hf_model_types = {"gemma2"},
    .gguf_rope_style = RopeStyle::kNeox,
    .qkv_bias = TensorNeed::kAbsent,
    .qk_norm = TensorNeed::kAbsent,
    .layer_tensors = kGemmaLayerTensors,
    .hf_norm_plus_one = true,
    .gguf_head_is_embedding = true,  // llama.cpp's gemma2: output = token_embd, always
    .read_hf = read_gemma2_hf,
    .read_gguf = read_gemma2_gguf,
    .write_gguf = write_gemma2_gguf,
    .defaults = {.qkv_bias = false,
                 .qk_norm = false,
                 .rope_theta = 10000.0f,
                 .rms_eps = 1e-6f,
                 .tied_embeddings = true},
};

}  // namespace loom::archs
