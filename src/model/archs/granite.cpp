// Granite (3.x dense): Llama's block with four multipliers: on the embeddings, on each
// block's output before the residual add, as the softmax scale, and dividing the logits.
#include "model/archs/archs.h"
#include "model/tensor_names.h"

namespace loom::archs {
namespace {

Status read_granite_hf(const nlohmann::json& j, ModelConfig& c) {
  LOOM_ASSIGN_OR_RETURN(auto embd, hf_number(j, "embedding_multiplier"));
  LOOM_ASSIGN_OR_RETURN(auto resid, hf_number(j, "residual_multiplier"));
  LOOM_ASSIGN_OR_RETURN(auto attn, hf_number(j, "attention_multiplier"));
  LOOM_ASSIGN_OR_RETURN(auto logits, hf_number(j, "logits_scaling"));
  c.embd_scale = static_cast<float>(embd.value_or(1));
  c.residual_scale = static_cast<float>(resid.value_or(1));
  c.attn_scale = static_cast<float>(attn.value_or(0));
  c.logit_scale = static_cast<float>(logits.value_or(1));
  if (!(c.logit_scale > 0)) return invalid_file("config.json: \"logits_scaling\" must be > 0");
  return Status::ok();
}

Status read_granite_gguf(const GgufFile& f, ModelConfig& c) {
  c.embd_scale = static_cast<float>(gguf_float(f, c, names::kEmbeddingScale).value_or(1));
  c.residual_scale = static_cast<float>(gguf_float(f, c, names::kResidualScale).value_or(1));
  c.attn_scale = static_cast<float>(gguf_float(f, c, names::kAttentionScale).value_or(0));
  c.logit_scale = static_cast<float>(gguf_float(f, c, names::kLogitScale).value_or(1));
  if (!(c.logit_scale > 0)) return invalid_file("GGUF: granite.logit_scale must be > 0");
  return Status::ok();
}

Status write_granite_gguf(GgufWriter& w, const ModelConfig& c) {
  gguf_set_f32(w, c, names::kEmbeddingScale, c.embd_scale);
  gguf_set_f32(w, c, names::kResidualScale, c.residual_scale);
  if (c.attn_scale > 0) gguf_set_f32(w, c, names::kAttentionScale, c.attn_scale);
  gguf_set_f32(w, c, names::kLogitScale, c.logit_scale);
  return Status::ok();
}

}  // namespace

const ArchSpec kGranite = {
    .name = "granite",
    .hf_model_types = {"granite"},
    .gguf_rope_style = RopeStyle::kInterleaved,
    .qkv_bias = TensorNeed::kOptional,
    .qk_norm = TensorNeed::kAbsent,
    .layer_tensors = kLlamaLayerTensors,
    .read_hf = read_granite_hf,
    .read_gguf = read_granite_gguf,
    .write_gguf = write_granite_gguf,
    .defaults = {.qkv_bias = false,
                 .qk_norm = false,
                 .rope_theta = 10000.0f,
                 .rms_eps = 1e-5f,
                 .tied_embeddings = true,
                 // llama.cpp requires logit_scale and reads the others (src/models/granite.cpp)
                 .keys = {{{names::kEmbeddingScale, 1.0f},
                           {names::kResidualScale, 1.0f},
                           {names::kAttentionScale, 0.0f},
                           {names::kLogitScale, 1.0f}}}},
};

}  // namespace loom::archs
