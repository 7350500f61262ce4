// What several architecture files share: the common per-layer tensor names and readers of
// hyperparameters spelled alike across families.
#include "model/archs/archs.h"
#include "model/tensor_names.h"

namespace loom::archs {
namespace {

constexpr LayerTensorName kLlamaNames[] = {
    {"input_layernorm.weight", names::kAttnNorm},
    {"self_attn.q_proj.weight", names::kAttnQ},
    {"self_attn.k_proj.weight", names::kAttnK},
    {"self_attn.v_proj.weight", names::kAttnV},
    {"self_attn.q_proj.bias", names::kAttnQBias},
    {"self_attn.k_proj.bias", names::kAttnKBias},
    {"self_attn.v_proj.bias", names::kAttnVBias},
    {"self_attn.q_norm.weight", names::kAttnQNorm},
    {"self_attn.k_norm.weight", names::kAttnKNorm},
    {"self_attn.o_proj.weight", names::kAttnOutput},
    {"post_attention_layernorm.weight", names::kFfnNorm},
    {"mlp.gate_proj.weight", names::kFfnGate},
    {"mlp.up_proj.weight", names::kFfnUp},
    {"mlp.down_proj.weight", names::kFfnDown},
};

constexpr LayerTensorName kGemmaNames[] = {
    {"input_layernorm.weight", names::kAttnNorm},
    {"self_attn.q_proj.weight", names::kAttnQ},
    {"self_attn.k_proj.weight", names::kAttnK},
    {"self_attn.v_proj.weight", names::kAttnV},
    {"self_attn.q_norm.weight", names::kAttnQNorm},
    {"self_attn.k_norm.weight", names::kAttnKNorm},
    {"self_attn.o_proj.weight", names::kAttnOutput},
    {"post_attention_layernorm.weight", names::kAttnPostNorm},
    {"pre_feedforward_layernorm.weight", names::kFfnNorm},
    {"post_feedforward_layernorm.weight", names::kFfnPostNorm},
    {"mlp.gate_proj.weight", names::kFfnGate},
    {"mlp.up_proj.weight", names::kFfnUp},
    {"mlp.down_proj.weight", names::kFfnDown},
};

}  // namespace

const std::span<const LayerTensorName> kLlamaLayerTensors = kLlamaNames;
const std::span<const LayerTensorName> kGemmaLayerTensors = kGemmaNames;

Result<std::optional<double>> hf_number(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<double>();
  if (!it->is_number())
    return invalid_file(std::string("config.json: \"") + key + "\" must be a number");
  return std::optional<double>(it->get<double>());
}

Status hf_sliding_layers(const nlohmann::json& j, ModelConfig& c, int pattern) {
  LOOM_ASSIGN_OR_RETURN(auto window, hf_number(j, "sliding_window"));
  if (!window) return Status::ok();
  if (*window < 1 || *window > INT32_MAX)
    return invalid_file("config.json: \"sliding_window\" must be a positive integer");
  auto types = j.find("layer_types");
  if (types != j.end() && !types->is_null()) {
    if (!types->is_array() || types->size() != static_cast<size_t>(c.n_layer))
      return invalid_file("config.json: \"layer_types\" must list one type per layer");
    for (int l = 0; l < c.n_layer; ++l) {
      const auto& t = (*types)[l];
      if (t == "sliding_attention")
        c.layers[l].window = static_cast<int32_t>(*window);
      else if (t != "full_attention")
        return unsupported("config.json: layer type " + t.dump() +
                           " is not supported (sliding_attention, full_attention)");
    }
    return Status::ok();
  }
  for (int l = 0; l < c.n_layer; ++l)
    if (pattern <= 0 || (l + 1) % pattern != 0) c.layers[l].window = static_cast<int32_t>(*window);
  return Status::ok();
}

std::optional<double> gguf_float(const GgufFile& f, const ModelConfig& c, std::string_view suffix) {
  return f.get_float(names::arch_key(c.arch, suffix));
}

std::optional<int64_t> gguf_int(const GgufFile& f, const ModelConfig& c, std::string_view suffix) {
  return f.get_int(names::arch_key(c.arch, suffix));
}

void gguf_set_f32(GgufWriter& w, const ModelConfig& c, std::string_view suffix, float v) {
  w.set_f32(names::arch_key(c.arch, suffix), v);
}

void gguf_set_u32(GgufWriter& w, const ModelConfig& c, std::string_view suffix, uint32_t v) {
  w.set_u32(names::arch_key(c.arch, suffix), v);
}

Result<int32_t> gguf_window(const ModelConfig& c, bool (*slides)(int layer, int n_layer)) {
  int32_t window = 0;
  for (const LayerSpec& s : c.layers)
    if (s.window > 0) window = s.window;
  if (window == 0) return 0;
  for (int l = 0; l < c.n_layer; ++l) {
    const int32_t want = slides(l, c.n_layer) ? window : 0;
    if (c.layers[l].window != want)
      return unsupported("convert: " + c.arch +
                         "'s sliding-window layers differ from the "
                         "pattern its GGUF files imply (layer " +
                         std::to_string(l) + ")");
  }
  return window;
}

}  // namespace loom::archs
