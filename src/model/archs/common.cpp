// What several architecture files share: the common per-layer tensor names and readers of
// hyperparameters spelled alike across families.
#include <cmath>
#include <sstream>

#include "model/archs/archs.h"
#include "model/tensor_names.h"

namespace loom::archs {
namespace {

// A bound for an error message: 1e-06, 1, 1e+30 rather than to_string's 0.000001.
std::string format_number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// clang-format off
// Llama's per-layer names, which the MoE tables extend.
#define LOOM_LLAMA_LAYER_NAMES                                 \
  {"input_layernorm.weight", names::kAttnNorm},                \
  {"self_attn.q_proj.weight", names::kAttnQ},                  \
  {"self_attn.k_proj.weight", names::kAttnK},                  \
  {"self_attn.v_proj.weight", names::kAttnV},                  \
  {"self_attn.q_proj.bias", names::kAttnQBias},                \
  {"self_attn.k_proj.bias", names::kAttnKBias},                \
  {"self_attn.v_proj.bias", names::kAttnVBias},                \
  {"self_attn.q_norm.weight", names::kAttnQNorm},              \
  {"self_attn.k_norm.weight", names::kAttnKNorm},              \
  {"self_attn.o_proj.weight", names::kAttnOutput},             \
  {"post_attention_layernorm.weight", names::kFfnNorm},        \
  {"mlp.gate_proj.weight", names::kFfnGate},                   \
  {"mlp.up_proj.weight", names::kFfnUp},                       \
  {"mlp.down_proj.weight", names::kFfnDown}
// clang-format on

constexpr LayerTensorName kLlamaNames[] = {LOOM_LLAMA_LAYER_NAMES};

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

constexpr LayerTensorName kQwenMoeNames[] = {
    LOOM_LLAMA_LAYER_NAMES,
    {"mlp.gate.weight", names::kFfnGateInp},
    {"mlp.experts.{e}.gate_proj.weight", names::kFfnGateExps},
    {"mlp.experts.{e}.up_proj.weight", names::kFfnUpExps},
    {"mlp.experts.{e}.down_proj.weight", names::kFfnDownExps},
    {"mlp.shared_expert_gate.weight", names::kFfnGateInpShexp},
    {"mlp.shared_expert.gate_proj.weight", names::kFfnGateShexp},
    {"mlp.shared_expert.up_proj.weight", names::kFfnUpShexp},
    {"mlp.shared_expert.down_proj.weight", names::kFfnDownShexp},
};

constexpr LayerTensorName kMixtralNames[] = {
    LOOM_LLAMA_LAYER_NAMES,
    {"block_sparse_moe.gate.weight", names::kFfnGateInp},
    {"block_sparse_moe.experts.{e}.w1.weight", names::kFfnGateExps},
    {"block_sparse_moe.experts.{e}.w3.weight", names::kFfnUpExps},
    {"block_sparse_moe.experts.{e}.w2.weight", names::kFfnDownExps},
};
#undef LOOM_LLAMA_LAYER_NAMES

}  // namespace

const std::span<const LayerTensorName> kLlamaLayerTensors = kLlamaNames;
const std::span<const LayerTensorName> kQwenMoeLayerTensors = kQwenMoeNames;
const std::span<const LayerTensorName> kMixtralLayerTensors = kMixtralNames;
const std::span<const LayerTensorName> kGemmaLayerTensors = kGemmaNames;

Result<std::optional<double>> hf_number(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<double>();
  if (!it->is_number())
    return invalid_file(std::string("config.json: \"") + key + "\" must be a number");
  return std::optional<double>(it->get<double>());
}

namespace {
Status hf_type_error(const char* key, const nlohmann::json& v, const char* want) {
  std::string got = v.dump();
  if (got.size() > 60) got = got.substr(0, 60) + "...";
  return invalid_file(std::string("config.json: \"") + key + "\" must be " + want + ", got " + got);
}
}  // namespace

Result<std::string> hf_string(const nlohmann::json& j, const char* key, std::string def) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return def;
  if (!it->is_string()) return hf_type_error(key, *it, "a string");
  return it->get<std::string>();
}

Result<bool> hf_bool(const nlohmann::json& j, const char* key, bool def) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return def;
  if (!it->is_boolean()) return hf_type_error(key, *it, "a boolean");
  return it->get<bool>();
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

Result<int64_t> gguf_int_in(const GgufFile& f, std::string_view key, int64_t def, int64_t lo,
                            int64_t hi) {
  const GgufValue* v = f.find(key);
  if (!v) return def;
  const auto i = v->as_int();
  if (!i || v->type() == GgufType::kBool || v->type() == GgufType::kArray)
    return invalid_file("GGUF metadata key " + std::string(key) + " must be an integer, got " +
                        v->to_display_string());
  if (*i < lo || *i > hi)
    return invalid_file("GGUF metadata key " + std::string(key) + " = " + std::to_string(*i) +
                        " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) +
                        "]");
  return *i;
}

Result<double> gguf_float_in(const GgufFile& f, std::string_view key, double def, double lo,
                             double hi) {
  const GgufValue* v = f.find(key);
  if (!v) return def;
  const auto d = v->as_float();
  if (!d || v->type() == GgufType::kBool || v->type() == GgufType::kArray)
    return invalid_file("GGUF metadata key " + std::string(key) + " must be a number, got " +
                        v->to_display_string());
  if (!std::isfinite(*d) || *d < lo || *d > hi)
    return invalid_file("GGUF metadata key " + std::string(key) + " = " + v->to_display_string() +
                        " is out of range [" + format_number(lo) + ", " + format_number(hi) + "]");
  return *d;
}

Result<int32_t> gguf_sliding_window(const GgufFile& f, const ModelConfig& c) {
  LOOM_ASSIGN_OR_RETURN(
      int64_t w, gguf_int_in(f, names::arch_key(c.arch, names::kSlidingWindow), 0, 0, INT32_MAX));
  return static_cast<int32_t>(w);
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

namespace {
Status check_moe(const MoeConfig& m, const std::string& source) {
  if (m.n_expert < 1 || m.n_expert > 4096 || m.n_expert_used < 1 || m.n_expert_used > m.n_expert ||
      m.n_ff_exp < 1 || m.n_ff_shexp < 0)
    return invalid_file(source + ": expert counts and sizes out of range (" +
                        std::to_string(m.n_expert) + " experts, " +
                        std::to_string(m.n_expert_used) + " used, width " +
                        std::to_string(m.n_ff_exp) + ")");
  return Status::ok();
}
}  // namespace

Status hf_moe(const nlohmann::json& j, ModelConfig& c, bool norm_default, bool required) {
  const char* count_key = j.contains("num_experts") ? "num_experts" : "num_local_experts";
  LOOM_ASSIGN_OR_RETURN(auto experts, hf_number(j, count_key));
  if (!experts || *experts == 0)
    return required ? invalid_file("config.json: " + c.arch + " without \"num_experts\"")
                    : Status::ok();
  LOOM_ASSIGN_OR_RETURN(auto used, hf_number(j, "num_experts_per_tok"));
  LOOM_ASSIGN_OR_RETURN(auto ff, hf_number(j, "moe_intermediate_size"));
  LOOM_ASSIGN_OR_RETURN(auto shared_ff, hf_number(j, "shared_expert_intermediate_size"));
  LOOM_ASSIGN_OR_RETURN(auto step, hf_number(j, "decoder_sparse_step"));
  MoeConfig& m = c.moe;
  m.n_expert = static_cast<int32_t>(*experts);
  m.n_expert_used = used ? static_cast<int32_t>(*used) : 0;
  m.n_ff_exp = ff ? static_cast<int32_t>(*ff) : c.n_ff;
  m.n_ff_shexp = shared_ff ? static_cast<int32_t>(*shared_ff) : 0;
  m.shexp_gate = m.n_ff_shexp > 0;
  auto norm = j.find("norm_topk_prob");
  m.norm_topk = norm != j.end() && norm->is_boolean() ? norm->get<bool>() : norm_default;
  LOOM_RETURN_IF_ERROR(check_moe(m, "config.json"));
  const int32_t sparse_step = step && *step >= 1 ? static_cast<int32_t>(*step) : 1;
  for (int l = 0; l < c.n_layer; ++l) c.layers[l].moe = (l + 1) % sparse_step == 0;
  if (auto dense = j.find("mlp_only_layers"); dense != j.end() && dense->is_array())
    for (const auto& l : *dense) {
      if (!l.is_number_integer() || l.get<int64_t>() < 0 || l.get<int64_t>() >= c.n_layer)
        return invalid_file("config.json: \"mlp_only_layers\" must list layer indices");
      c.layers[l.get<int>()].moe = false;
    }
  return Status::ok();
}

Status gguf_moe(const GgufFile& f, ModelConfig& c, const GgufMoe& rules) {
  const int64_t experts = gguf_int(f, c, names::kExpertCount).value_or(0);
  if (experts == 0)
    return rules.required ? invalid_file("GGUF: " + c.arch + " without " +
                                         names::arch_key(c.arch, names::kExpertCount))
                          : Status::ok();
  MoeConfig& m = c.moe;
  m.n_expert = static_cast<int32_t>(experts);
  m.n_expert_used = static_cast<int32_t>(gguf_int(f, c, names::kExpertUsedCount).value_or(0));
  const int64_t ff_default =
      rules.ff_exp_per_used && m.n_expert_used > 0 ? c.n_ff / m.n_expert_used : c.n_ff;
  m.n_ff_exp =
      static_cast<int32_t>(gguf_int(f, c, names::kExpertFeedForwardLength).value_or(ff_default));
  const auto shared = gguf_int(f, c, names::kExpertSharedFeedForwardLength);
  switch (rules.shared) {
    case GgufMoe::Shared::kNone:
      m.n_ff_shexp = 0;
      break;
    case GgufMoe::Shared::kIfSized:
      m.n_ff_shexp = static_cast<int32_t>(shared.value_or(0));
      break;
    case GgufMoe::Shared::kGated:
      m.n_ff_shexp = static_cast<int32_t>(shared.value_or(c.n_ff));
      if (m.n_ff_shexp < 1)
        return invalid_file("GGUF: " + c.arch + "'s shared expert needs a width (" +
                            names::arch_key(c.arch, names::kExpertSharedFeedForwardLength) + ")");
      break;
  }
  m.shexp_gate = m.n_ff_shexp > 0;
  const auto norm = f.get_bool(names::arch_key(c.arch, names::kExpertWeightsNorm));
  m.norm_topk = norm.value_or(rules.norm_default);
  LOOM_RETURN_IF_ERROR(check_moe(m, "GGUF"));
  for (LayerSpec& s : c.layers) s.moe = true;
  return Status::ok();
}

Status gguf_write_moe(GgufWriter& w, const ModelConfig& c, bool norm_default) {
  const MoeConfig& m = c.moe;
  if (m.n_expert == 0) return Status::ok();
  for (int l = 0; l < c.n_layer; ++l)
    if (!c.layers[l].moe)
      return unsupported("convert: layer " + std::to_string(l) + " of this " + c.arch +
                         " model is dense; llama.cpp's " + c.arch + " files make every layer MoE");
  if (m.norm_topk != norm_default)
    return unsupported("convert: norm_topk_prob " + std::string(m.norm_topk ? "true" : "false") +
                       " cannot be written for " + c.arch + " (llama.cpp assumes " +
                       (norm_default ? "true" : "false") + ")");
  gguf_set_u32(w, c, names::kExpertCount, m.n_expert);
  gguf_set_u32(w, c, names::kExpertUsedCount, m.n_expert_used);
  gguf_set_u32(w, c, names::kExpertFeedForwardLength, m.n_ff_exp);
  if (m.n_ff_shexp > 0) gguf_set_u32(w, c, names::kExpertSharedFeedForwardLength, m.n_ff_shexp);
  return Status::ok();
}

}  // namespace loom::archs
