// Qwen3.5-MoE (text): Qwen3.5's layers (model/archs/qwen35.cpp) with Qwen3-Next's experts
// (a shared expert with a sigmoid gate, norm_topk_prob).
#include "model/archs/archs.h"

namespace loom::archs {

Status read_qwen35_hf(const nlohmann::json& j, ModelConfig& c);
Status read_qwen35_gguf(const GgufFile& f, ModelConfig& c);
Status write_qwen35_gguf(GgufWriter& w, const ModelConfig& c);

namespace {

Status read_hf(const nlohmann::json& j, ModelConfig& c) {
  LOOM_RETURN_IF_ERROR(read_qwen35_hf(j, c));
  LOOM_RETURN_IF_ERROR(hf_moe(j, c, /*norm_default=*/true, /*required=*/true));
  hybrid_mtp_layers(c);
  return Status::ok();
}
Status read_gguf(const GgufFile& f, ModelConfig& c) {
  LOOM_RETURN_IF_ERROR(read_qwen35_gguf(f, c));
  LOOM_RETURN_IF_ERROR(gguf_moe(f, c, kQwenHybridMoe));
  hybrid_mtp_layers(c);
  return Status::ok();
}
Status write_gguf(GgufWriter& w, const ModelConfig& c) {
  LOOM_RETURN_IF_ERROR(write_qwen35_gguf(w, c));
  return gguf_write_moe(w, c, /*norm_default=*/true);
}

}  // namespace

const ArchSpec kQwen35Moe = {
    .name = "qwen35moe",
    .hf_model_types = {"qwen3_5_moe_text"},
    .gguf_rope_style = RopeStyle::kNeox,
    .qkv_bias = TensorNeed::kAbsent,
    .qk_norm = TensorNeed::kRequired,
    .fused_gate_up_exps = TensorNeed::kOptional,
    .layer_tensors = kQwen35MoeLayerTensors,
    .hf_norm_plus_one = true,
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
