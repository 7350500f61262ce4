// Gemma 3 (text): Gemma 2's block with q/k norms and no soft-capping; local (sliding-window)
// layers rotate with their own RoPE base and without the global layers' scaling; the window
// pattern comes from layer_types (every sixth layer global by default).
#include "model/archs/archs.h"
#include "model/tensor_names.h"

namespace loom::archs {

void gemma_common(ModelConfig& c);
Status gemma_hf_scale(const nlohmann::json& j, ModelConfig& c);

namespace {

constexpr int kGlobalEvery = 6;
constexpr float kLocalRopeTheta = 10000.0f;  // rope_local_base_freq of every released model

void local_rope(ModelConfig& c, float theta) {
  for (LayerSpec& s : c.layers)
    if (s.window > 0) {
      s.rope_theta = theta;
      s.rope_scaled = false;
    }
}

Status read_gemma3_hf(const nlohmann::json& j, ModelConfig& c) {
  gemma_common(c);
  LOOM_RETURN_IF_ERROR(gemma_hf_scale(j, c));
  int pattern = kGlobalEvery;
  LOOM_ASSIGN_OR_RETURN(auto p, hf_number(j, "sliding_window_pattern"));
  if (p) pattern = static_cast<int>(*p);
  LOOM_RETURN_IF_ERROR(hf_sliding_layers(j, c, pattern));
  // transformers >= 5: rope_parameters {"full_attention": {...}, "sliding_attention": {...}};
  // before: rope_theta (global) and rope_local_base_freq.
  float local_theta = kLocalRopeTheta;
  LOOM_ASSIGN_OR_RETURN(auto lb, hf_number(j, "rope_local_base_freq"));
  if (lb) local_theta = static_cast<float>(*lb);
  auto rp = j.find("rope_parameters");
  if (rp != j.end() && rp->is_object()) {
    if (auto s = rp->find("sliding_attention"); s != rp->end() && s->is_object()) {
      LOOM_ASSIGN_OR_RETURN(auto t, hf_number(*s, "rope_theta"));
      if (t) local_theta = static_cast<float>(*t);
      const std::string type = s->value("rope_type", std::string("default"));
      if (type != "default")
        return unsupported("config.json: rope_type '" + type +
                           "' on sliding layers is not supported");
    }
  }
  local_rope(c, local_theta);
  return Status::ok();
}

Status read_gemma3_gguf(const GgufFile& f, ModelConfig& c) {
  gemma_common(c);
  LOOM_ASSIGN_OR_RETURN(const int32_t window, gguf_sliding_window(f, c));
  for (int l = 0; l < c.n_layer; ++l)
    if ((l + 1) % kGlobalEvery != 0) c.layers[l].window = window;
  local_rope(c, kLocalRopeTheta);
  return Status::ok();
}

bool local_layer(int l, int) {
  return (l + 1) % kGlobalEvery != 0;
}

Status write_gemma3_gguf(GgufWriter& w, const ModelConfig& c) {
  LOOM_ASSIGN_OR_RETURN(int32_t window, gguf_window(c, local_layer));
  if (window > 0) gguf_set_u32(w, c, names::kSlidingWindow, window);
  for (const LayerSpec& s : c.layers)
    if (s.window > 0 && s.rope_theta != kLocalRopeTheta)
      return unsupported(
          "convert: gemma3's local RoPE base differs from the 10000 its GGUF "
          "files imply");
  return Status::ok();
}

}  // namespace

const ArchSpec kGemma3 = {
    .name = "gemma3",
    .hf_model_types = {"gemma3_text"},
    .gguf_rope_style = RopeStyle::kNeox,
    .qkv_bias = TensorNeed::kAbsent,
    .qk_norm = TensorNeed::kRequired,
    .layer_tensors = kGemmaLayerTensors,
    .hf_norm_plus_one = true,
    .read_hf = read_gemma3_hf,
    .read_gguf = read_gemma3_gguf,
    .write_gguf = write_gemma3_gguf,
    .defaults = {.qkv_bias = false,
                 .qk_norm = true,
                 .rope_theta = 1e6f,
                 .rms_eps = 1e-6f,
                 .tied_embeddings = true},
};

}  // namespace loom::archs
