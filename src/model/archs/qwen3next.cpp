// Qwen3-Next: Gated DeltaNet layers with every fourth layer full attention (model/archs/
// qwen_hybrid.cpp), Qwen2-MoE's experts (norm_topk_prob, a shared expert with a sigmoid gate).
// llama.cpp's qwen3next files keep the value heads grouped by key head and b / a fused in
// ssm_ba as Hugging Face's in_proj_ba holds them; its in_proj_qkvz is split into attn_qkv and
// attn_gate.
#include "model/archs/archs.h"

namespace loom::archs {
namespace {

Status read_hf(const nlohmann::json& j, ModelConfig& c) {
  LOOM_RETURN_IF_ERROR(hf_deltanet(j, c));
  c.deltanet.fused_ba = true;
  LOOM_RETURN_IF_ERROR(hf_moe(j, c, /*norm_default=*/true, /*required=*/true));
  hybrid_mtp_layers(c);
  return Status::ok();
}
Status read_gguf(const GgufFile& f, ModelConfig& c) {
  LOOM_RETURN_IF_ERROR(gguf_deltanet(f, c));
  c.deltanet.fused_ba = true;
  LOOM_RETURN_IF_ERROR(gguf_moe(f, c, kQwenHybridMoe));
  hybrid_mtp_layers(c);
  return Status::ok();
}
Status write_gguf(GgufWriter& w, const ModelConfig& c) {
  LOOM_RETURN_IF_ERROR(gguf_write_deltanet(w, c));
  return gguf_write_moe(w, c, /*norm_default=*/true);
}

}  // namespace

const ArchSpec kQwen3Next = {
    .name = "qwen3next",
    .hf_model_types = {"qwen3_next"},
    .gguf_rope_style = RopeStyle::kNeox,
    .qkv_bias = TensorNeed::kAbsent,
    .qk_norm = TensorNeed::kRequired,
    .fused_gate_up_exps = TensorNeed::kOptional,
    .layer_tensors = kQwen3NextLayerTensors,
    .hf_norm_plus_one = true,  // Qwen3NextRMSNorm: x·(1 + w), but not the gated norm
    .hf_mtp_prefix = "mtp.",
    .mtp_tensors = kQwenMtpTensors,
    .read_hf = read_hf,
    .read_gguf = read_gguf,
    .write_gguf = write_gguf,
    .defaults = {.qkv_bias = false,
                 .qk_norm = true,
                 .rope_theta = 1e7f,
                 .rms_eps = 1e-6f,
                 .tied_embeddings = false},
};

}  // namespace loom::archs
