// SmolLM3: Llama's block where some layers use no RoPE at all (`no_rope_layers`: 1 = rotate,
// 0 = not; by default every fourth layer goes without). Its GGUF files are llama's: llama.cpp
// rotates interleaved pairs (LLAMA_ROPE_TYPE_NORM) and its converter permutes Q/K rows.
#include "model/archs/archs.h"

namespace loom::archs {
namespace {

constexpr int kNoRopeEvery = 4;  // no_rope_layer_interval of the released model

void default_no_rope(ModelConfig& c, int every) {
  for (int l = 0; l < c.n_layer; ++l) c.layers[l].rope = (l + 1) % every != 0;
}

Status read_smollm3_hf(const nlohmann::json& j, ModelConfig& c) {
  auto it = j.find("no_rope_layers");
  if (it == j.end() || it->is_null()) {
    LOOM_ASSIGN_OR_RETURN(auto every, hf_number(j, "no_rope_layer_interval"));
    default_no_rope(c, every ? static_cast<int>(*every) : kNoRopeEvery);
    return Status::ok();
  }
  if (!it->is_array() || it->size() != static_cast<size_t>(c.n_layer))
    return invalid_file("config.json: \"no_rope_layers\" must list one 0 or 1 per layer");
  for (int l = 0; l < c.n_layer; ++l) {
    const auto& v = (*it)[l];
    if (!v.is_number_integer() || (v != 0 && v != 1))
      return invalid_file("config.json: \"no_rope_layers\" must list one 0 or 1 per layer");
    c.layers[l].rope = v == 1;
  }
  return Status::ok();
}

Status read_smollm3_gguf(const GgufFile&, ModelConfig& c) {
  default_no_rope(c, kNoRopeEvery);
  return Status::ok();
}

// llama.cpp's smollm3 has no key for the pattern: every fourth layer, fixed.
Status write_smollm3_gguf(GgufWriter&, const ModelConfig& c) {
  for (int l = 0; l < c.n_layer; ++l)
    if (c.layers[l].rope != ((l + 1) % kNoRopeEvery != 0))
      return unsupported(
          "convert: smollm3's no_rope_layers differ from every fourth layer, "
          "which is all its GGUF files can say (layer " +
          std::to_string(l) + ")");
  return Status::ok();
}

}  // namespace

const ArchSpec kSmolLm3 = {
    .name = "smollm3",
    .hf_model_types = {"smollm3"},
    .gguf_rope_style = RopeStyle::kInterleaved,
    .qkv_bias = TensorNeed::kAbsent,
    .qk_norm = TensorNeed::kAbsent,
    .layer_tensors = kLlamaLayerTensors,
    .read_hf = read_smollm3_hf,
    .read_gguf = read_smollm3_gguf,
    .write_gguf = write_smollm3_gguf,
    .defaults = {.qkv_bias = false,
                 .qk_norm = false,
                 .rope_theta = 5e6f,
                 .rms_eps = 1e-6f,
                 .tied_embeddings = true},
};

}  // namespace loom::archs
