// Qwen3.5 (text): Qwen3-Next's hybrid of Gated DeltaNet and gated full attention
// (model/archs/qwen_hybrid.cpp) with a dense FFN and separate in_proj_qkv / z / b / a.
// llama.cpp's qwen35 files store the value heads tiled over the key heads
// (DeltaNetConfig::v_heads_tiled), so a checkpoint's are reordered as its converter does; and
// they require rope.dimension_sections (multimodal RoPE, which text alone reduces to plain
// RoPE over the rotated dimensions).
#include "model/archs/archs.h"
#include "model/tensor_names.h"

namespace loom::archs {

Status read_qwen35_hf(const nlohmann::json& j, ModelConfig& c) {
  LOOM_RETURN_IF_ERROR(hf_deltanet(j, c));
  c.deltanet.v_heads_tiled = true;
  hybrid_mtp_layers(c);  // dense (Qwen3.5-MoE's reader redoes them with its experts)
  return Status::ok();
}
Status read_qwen35_gguf(const GgufFile& f, ModelConfig& c) {
  LOOM_RETURN_IF_ERROR(gguf_deltanet(f, c));
  c.deltanet.v_heads_tiled = true;
  hybrid_mtp_layers(c);
  return Status::ok();
}
Status write_qwen35_gguf(GgufWriter& w, const ModelConfig& c) {
  LOOM_RETURN_IF_ERROR(gguf_write_deltanet(w, c));
  // llama.cpp's qwen35 loader requires sections: the checkpoint's mrope_section (written with
  // the other RoPE keys), else the default for this head (ModelConfig::text_rope_sections).
  if (c.rope_sections.empty())
    w.set(names::arch_key(c.arch, names::kRopeDimensionSections),
          GgufValue::of_int_array(GgufType::kI32, ModelConfig::text_rope_sections(
                                                      (c.n_rot > 0 ? c.n_rot : c.head_dim) / 2)));
  return Status::ok();
}

const ArchSpec kQwen35 = {
    .name = "qwen35",
    .hf_model_types = {"qwen3_5_text"},
    .gguf_rope_style = RopeStyle::kNeox,
    .qkv_bias = TensorNeed::kAbsent,
    .qk_norm = TensorNeed::kRequired,
    .layer_tensors = kQwen35LayerTensors,
    .hf_norm_plus_one = true,  // Qwen3_5RMSNorm: x·(1 + w), but not the gated norm
    .hf_mtp_prefix = "mtp.",
    .mtp_tensors = kQwenMtpTensors,
    .read_hf = read_qwen35_hf,
    .read_gguf = read_qwen35_gguf,
    .write_gguf = write_qwen35_gguf,
    .defaults = {.qkv_bias = false,
                 .qk_norm = true,
                 .rope_theta = 1e7f,
                 .rms_eps = 1e-6f,
                 .tied_embeddings = true},
};

}  // namespace loom::archs
