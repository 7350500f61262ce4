// What Qwen3-Next and Qwen3.5 share: Gated DeltaNet layers mixed with full attention
// (layer_types, or every full_attention_interval-th layer attends; GGUF: recurrent_layers),
// full-attention layers with an output gate, partial RoPE and per-head q/k norms, and the recurrent
// layers' sizes as config.json and llama.cpp's GGUF keys spell them.
#include "model/archs/archs.h"
#include "model/tensor_names.h"

namespace loom::archs {
namespace {

// clang-format off
// The full-attention layers' names (q_proj holds each head's query then its gate), the
// pre-FFN norm (llama.cpp's post_attention_norm) and the dense FFN (Qwen3.5; Qwen3-Next's
// mlp_only_layers).
#define LOOM_QWEN_HYBRID_NAMES                                    \
  {"input_layernorm.weight", names::kAttnNorm},                   \
  {"self_attn.q_proj.weight", names::kAttnQ},                     \
  {"self_attn.k_proj.weight", names::kAttnK},                     \
  {"self_attn.v_proj.weight", names::kAttnV},                     \
  {"self_attn.q_norm.weight", names::kAttnQNorm},                 \
  {"self_attn.k_norm.weight", names::kAttnKNorm},                 \
  {"self_attn.o_proj.weight", names::kAttnOutput},                \
  {"post_attention_layernorm.weight", names::kAttnPostNorm},      \
  {"mlp.gate_proj.weight", names::kFfnGate},                      \
  {"mlp.up_proj.weight", names::kFfnUp},                          \
  {"mlp.down_proj.weight", names::kFfnDown},                      \
  {"linear_attn.conv1d.weight", names::kSsmConv1d},               \
  {"linear_attn.norm.weight", names::kSsmNorm}
// Qwen3-Next's and Qwen3.5-MoE's experts, shared expert and its gate.
#define LOOM_QWEN_HYBRID_MOE_NAMES                                \
  {"mlp.gate.weight", names::kFfnGateInp},                        \
  {"mlp.experts.{e}.gate_proj.weight", names::kFfnGateExps},      \
  {"mlp.experts.{e}.up_proj.weight", names::kFfnUpExps},          \
  {"mlp.experts.{e}.down_proj.weight", names::kFfnDownExps},      \
  {"mlp.shared_expert_gate.weight", names::kFfnGateInpShexp},     \
  {"mlp.shared_expert.gate_proj.weight", names::kFfnGateShexp},   \
  {"mlp.shared_expert.up_proj.weight", names::kFfnUpShexp},       \
  {"mlp.shared_expert.down_proj.weight", names::kFfnDownShexp}
// Qwen3.5's separate projections, their value heads reordered from grouped to tiled as
// llama.cpp's converter writes qwen35 files (DeltaNetConfig::v_heads_tiled).
#define LOOM_QWEN35_LINEAR_NAMES                                  \
  {"linear_attn.in_proj_qkv.weight#tile", names::kAttnQkv},       \
  {"linear_attn.in_proj_z.weight#tile", names::kAttnGate},        \
  {"linear_attn.in_proj_b.weight#tile", names::kSsmBeta},         \
  {"linear_attn.in_proj_a.weight#tile", names::kSsmAlpha},        \
  {"linear_attn.A_log#neg_exp#tile", names::kSsmA},               \
  {"linear_attn.dt_bias#tile", names::kSsmDt},                    \
  {"linear_attn.out_proj.weight#tile_cols", names::kSsmOut}
// clang-format on

// The conv1d taps of Qwen3.5 are reordered like the rows they convolve; its table overrides
// the shared entry by coming first (names are looked up in order).
constexpr LayerTensorName kQwen3NextNames[] = {
    LOOM_QWEN_HYBRID_NAMES,
    LOOM_QWEN_HYBRID_MOE_NAMES,
    {"linear_attn.in_proj_qkvz.weight#qkv", names::kAttnQkv},
    {"linear_attn.in_proj_qkvz.weight#z", names::kAttnGate},
    {"linear_attn.in_proj_ba.weight", names::kSsmBa},
    {"linear_attn.A_log#neg_exp", names::kSsmA},
    {"linear_attn.dt_bias", names::kSsmDt},
    {"linear_attn.out_proj.weight", names::kSsmOut},
};
constexpr LayerTensorName kQwen35Names[] = {
    {"linear_attn.conv1d.weight#tile", names::kSsmConv1d},
    LOOM_QWEN_HYBRID_NAMES,
    LOOM_QWEN35_LINEAR_NAMES,
};
constexpr LayerTensorName kQwen35MoeNames[] = {
    {"linear_attn.conv1d.weight#tile", names::kSsmConv1d},
    LOOM_QWEN_HYBRID_NAMES,
    LOOM_QWEN_HYBRID_MOE_NAMES,
    LOOM_QWEN35_LINEAR_NAMES,
};
#undef LOOM_QWEN_HYBRID_NAMES
#undef LOOM_QWEN_HYBRID_MOE_NAMES
#undef LOOM_QWEN35_LINEAR_NAMES

// The multi-token prediction module's own tensors under "mtp.", as llama.cpp's converter
// maps them to nextn names: fc over [embedding, hidden] (vLLM's qwen3_next_mtp concatenates
// them in that order), the two input norms, and the norm before the shared LM head.
constexpr LayerTensorName kQwenMtpNames[] = {
    {"fc.weight", names::kNextnEhProj},
    {"pre_fc_norm_embedding.weight", names::kNextnEnorm},
    {"pre_fc_norm_hidden.weight", names::kNextnHnorm},
    {"norm.weight", names::kNextnHeadNorm},
};

constexpr int32_t kDefaultFullAttentionInterval = 4;  // transformers' and llama.cpp's default

// Every interval-th layer (1-based) attends fully, the others are recurrent.
void interval_layers(ModelConfig& c, int32_t interval) {
  for (int l = 0; l < c.n_layer; ++l) c.layers[l].deltanet = (l + 1) % interval != 0;
}

Status finish(ModelConfig& c, const std::string& source) {
  const DeltaNetConfig& d = c.deltanet;
  if (d.n_k_heads < 1 || d.n_v_heads < 1 || d.n_v_heads % d.n_k_heads != 0 || d.d_k < 1 ||
      d.d_v < 1 || d.conv_kernel < 1 || d.n_k_heads > 1024 || d.n_v_heads > 1024 || d.d_k > 1024 ||
      d.d_v > 1024 || d.conv_kernel > 64)
    return invalid_file(source + ": Gated DeltaNet sizes out of range (" +
                        std::to_string(d.n_k_heads) + " key heads of " + std::to_string(d.d_k) +
                        ", " + std::to_string(d.n_v_heads) + " value heads of " +
                        std::to_string(d.d_v) + ", kernel " + std::to_string(d.conv_kernel) + ")");
  // Recurrent layers have no K/V; the full-attention ones gate their output.
  c.attn_output_gate = true;
  c.ffn_norm_named_post_attention = true;
  return Status::ok();
}

}  // namespace

const std::span<const LayerTensorName> kQwen3NextLayerTensors = kQwen3NextNames;
const std::span<const LayerTensorName> kQwen35LayerTensors = kQwen35Names;
const std::span<const LayerTensorName> kQwen35MoeLayerTensors = kQwen35MoeNames;
const std::span<const LayerTensorName> kQwenMtpTensors = kQwenMtpNames;

void hybrid_mtp_layers(ModelConfig& c) {
  // One gated full-attention block each (vLLM builds it with layer_type "full_attention"),
  // with the model's FFN kind: experts and the shared expert where the model has experts.
  LayerSpec spec;
  spec.moe = c.moe.n_expert > 0;
  c.mtp_layers.assign(c.n_mtp_layers, spec);
  c.mtp_hidden_after_norm = true;
}

Status hf_deltanet(const nlohmann::json& j, ModelConfig& c) {
  DeltaNetConfig& d = c.deltanet;
  auto integer = [&](const char* key, int64_t def, int32_t* out) -> Status {
    LOOM_ASSIGN_OR_RETURN(auto v, hf_number(j, key));
    if (!v && def < 0) return invalid_file("config.json: " + c.arch + " without \"" + key + "\"");
    const double x = v ? *v : static_cast<double>(def);
    if (x < 0 || x > INT32_MAX || x != static_cast<int32_t>(x))
      return invalid_file(std::string("config.json: \"") + key + "\" must be a whole number");
    *out = static_cast<int32_t>(x);
    return Status::ok();
  };
  LOOM_RETURN_IF_ERROR(integer("linear_num_key_heads", -1, &d.n_k_heads));
  LOOM_RETURN_IF_ERROR(integer("linear_num_value_heads", -1, &d.n_v_heads));
  LOOM_RETURN_IF_ERROR(integer("linear_key_head_dim", -1, &d.d_k));
  LOOM_RETURN_IF_ERROR(integer("linear_value_head_dim", -1, &d.d_v));
  LOOM_RETURN_IF_ERROR(integer("linear_conv_kernel_dim", -1, &d.conv_kernel));
  if (auto types = j.find("layer_types"); types != j.end() && types->is_array()) {
    if (types->size() != static_cast<size_t>(c.n_layer))
      return invalid_file("config.json: \"layer_types\" must have num_hidden_layers entries");
    for (int l = 0; l < c.n_layer; ++l) {
      const auto& t = (*types)[l];
      const std::string type = t.is_string() ? t.get<std::string>() : "";
      if (type != "linear_attention" && type != "full_attention")
        return invalid_file("config.json: layer_types entry \"" + type +
                            "\" (expected linear_attention or full_attention)");
      c.layers[l].deltanet = type == "linear_attention";
    }
  } else {
    int32_t interval = kDefaultFullAttentionInterval;
    LOOM_RETURN_IF_ERROR(
        integer("full_attention_interval", kDefaultFullAttentionInterval, &interval));
    if (interval < 1) return invalid_file("config.json: full_attention_interval must be >= 1");
    interval_layers(c, interval);
  }
  return finish(c, "config.json");
}

Status gguf_deltanet(const GgufFile& f, ModelConfig& c) {
  auto get = [&](std::string_view suffix) {
    const int64_t v = gguf_int(f, c, suffix).value_or(0);
    return v < 0 || v > INT32_MAX ? int32_t{0} : static_cast<int32_t>(v);
  };
  DeltaNetConfig& d = c.deltanet;
  d.conv_kernel = get(names::kSsmConvKernel);
  d.d_k = get(names::kSsmStateSize);
  d.n_k_heads = get(names::kSsmGroupCount);
  d.n_v_heads = get(names::kSsmTimeStepRank);
  const int32_t inner = get(names::kSsmInnerSize);
  d.d_v = d.n_v_heads > 0 && inner % d.n_v_heads == 0 ? inner / d.n_v_heads : 0;
  // llama.cpp reads which layers are recurrent from recurrent_layers where the file has it
  // (its converter writes it from layer_types), else every interval-th layer attends.
  if (const GgufValue* v = f.find(names::arch_key(c.arch, names::kRecurrentLayers))) {
    // An array of one bool per block, or (as llama.cpp also takes it) one value for all.
    const size_t n_blocks = static_cast<size_t>(c.n_layer + c.n_mtp_layers);
    std::vector<int64_t> flags;
    if (v->type() == GgufType::kArray) {
      if (const std::vector<int64_t>* a = v->as_int_array()) flags = *a;
    } else if (auto one = v->as_int()) {
      flags.assign(n_blocks, *one);
    }
    const std::string k = "GGUF: " + names::arch_key(c.arch, names::kRecurrentLayers);
    if (flags.size() != n_blocks)
      return invalid_file(k + " must list one bool per block (" + std::to_string(n_blocks) + ")");
    for (int l = 0; l < c.n_layer; ++l) c.layers[l].deltanet = flags[l] != 0;
    for (int l = c.n_layer; l < c.n_layer + c.n_mtp_layers; ++l)
      if (flags[l] != 0)
        return unsupported(k + " marks multi-token prediction block " + std::to_string(l) +
                           " recurrent; loom's are full attention");
    return finish(c, "GGUF");
  }
  const int64_t interval =
      gguf_int(f, c, names::kFullAttentionInterval).value_or(kDefaultFullAttentionInterval);
  if (interval < 1 || interval > c.n_layer + 1)
    return invalid_file("GGUF: " + names::arch_key(c.arch, names::kFullAttentionInterval) +
                        " out of range");
  interval_layers(c, static_cast<int32_t>(interval));
  return finish(c, "GGUF");
}

Status gguf_write_deltanet(GgufWriter& w, const ModelConfig& c) {
  // As llama.cpp's converter writes them: the sizes, which blocks are recurrent (the multi-token
  // prediction blocks not), and the interval older readers fall back to: every interval-th
  // layer attends where the pattern is that, else transformers' default (unread then).
  int32_t interval = 0;
  while (interval < c.n_layer && c.layers[interval].deltanet) ++interval;
  interval += 1;
  std::vector<bool> recurrent(static_cast<size_t>(c.n_layer + c.n_mtp_layers), false);
  bool regular = true;
  for (int l = 0; l < c.n_layer; ++l) {
    recurrent[l] = c.layers[l].deltanet;
    regular = regular && c.layers[l].deltanet == ((l + 1) % interval != 0);
  }
  if (!regular) interval = kDefaultFullAttentionInterval;
  const DeltaNetConfig& d = c.deltanet;
  gguf_set_u32(w, c, names::kSsmConvKernel, d.conv_kernel);
  gguf_set_u32(w, c, names::kSsmStateSize, d.d_k);
  gguf_set_u32(w, c, names::kSsmGroupCount, d.n_k_heads);
  gguf_set_u32(w, c, names::kSsmTimeStepRank, d.n_v_heads);
  gguf_set_u32(w, c, names::kSsmInnerSize, d.n_v_heads * d.d_v);
  w.set(names::arch_key(c.arch, names::kRecurrentLayers), GgufValue::of_bool_array(recurrent));
  gguf_set_u32(w, c, names::kFullAttentionInterval, interval);
  return Status::ok();
}

}  // namespace loom::archs
