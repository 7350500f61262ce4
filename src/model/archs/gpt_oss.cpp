// gpt-oss (OpenAI): pre-norm blocks with q/k/v/o biases, a learned attention sink per query
// head, sliding-window (even) and full (odd) layers alternating, YaRN RoPE, and a
// Mixture-of-Experts FFN in every layer: a biased router whose top-k logits are softmaxed,
// experts with biases and the clamped SwiGLU (Activation::kSwigluOai). Its Hugging Face
// checkpoints fuse each layer's experts into gate_up_proj [X][E][2F] with gate and up in
// alternating columns, and down_proj [X][F][E]; GGUF stores llama.cpp's separate, transposed
// ffn_{gate,up,down}_exps (model/hf_tensors.h derives them).
#include "model/archs/archs.h"
#include "model/tensor_names.h"

namespace loom::archs {
namespace {

constexpr LayerTensorName kNames[] = {
    {"input_layernorm.weight", names::kAttnNorm},
    {"self_attn.q_proj.weight", names::kAttnQ},
    {"self_attn.k_proj.weight", names::kAttnK},
    {"self_attn.v_proj.weight", names::kAttnV},
    {"self_attn.q_proj.bias", names::kAttnQBias},
    {"self_attn.k_proj.bias", names::kAttnKBias},
    {"self_attn.v_proj.bias", names::kAttnVBias},
    {"self_attn.o_proj.weight", names::kAttnOutput},
    {"self_attn.o_proj.bias", names::kAttnOutputBias},
    {"self_attn.sinks", names::kAttnSinks},
    {"post_attention_layernorm.weight", names::kAttnPostNorm},
    {"mlp.router.weight", names::kFfnGateInp},
    {"mlp.router.bias", names::kFfnGateInpBias},
    {"mlp.experts.gate_up_proj#even", names::kFfnGateExps},
    {"mlp.experts.gate_up_proj#odd", names::kFfnUpExps},
    {"mlp.experts.down_proj#t", names::kFfnDownExps},
    {"mlp.experts.gate_up_proj_bias#even", names::kFfnGateExpsBias},
    {"mlp.experts.gate_up_proj_bias#odd", names::kFfnUpExpsBias},
    {"mlp.experts.down_proj_bias", names::kFfnDownExpsBias},
};

// What every gpt-oss model is, from either format.
void common(ModelConfig& c) {
  c.qkv_bias = true;
  c.attn_out_bias = true;
  c.attn_sinks = true;
  c.ffn_norm_named_post_attention = true;
  c.activation = Activation::kSwigluOai;
  c.moe.router_bias = true;
  c.moe.expert_bias = true;
  c.moe.norm_topk = true;  // softmax over the top-k logits
}

Status read_hf(const nlohmann::json& j, ModelConfig& c) {
  LOOM_RETURN_IF_ERROR(hf_moe(j, c, /*norm_default=*/true, /*required=*/true));
  common(c);
  return hf_sliding_layers(j, c, 2);
}

bool even_layers_slide(int l, int) {
  return l % 2 == 0;
}

Status read_gguf(const GgufFile& f, ModelConfig& c) {
  LOOM_RETURN_IF_ERROR(gguf_moe(f, c, {.required = true, .shared = GgufMoe::Shared::kNone}));
  common(c);
  // llama.cpp's gpt-oss: every other layer slides, starting with the first. Its loader
  // requires the window (as loom convert refuses a checkpoint without one): a file without it
  // would otherwise run every layer as full attention, a different model.
  LOOM_ASSIGN_OR_RETURN(const int32_t window, gguf_sliding_window(f, c));
  if (window < 1)
    return invalid_file("GGUF: gpt-oss needs " + names::arch_key(c.arch, names::kSlidingWindow) +
                        " (the attention window of its even layers) to be present and positive");
  for (int l = 0; l < c.n_layer; ++l)
    if (even_layers_slide(l, c.n_layer)) c.layers[l].window = window;
  // GGUF cannot say YaRN's `truncate`; gpt-oss's checkpoints all set it false.
  c.rope_scaling.yarn_truncate = false;
  return Status::ok();
}

Status write_gguf(GgufWriter& w, const ModelConfig& c) {
  LOOM_RETURN_IF_ERROR(gguf_write_moe(w, c, /*norm_default=*/true));
  LOOM_ASSIGN_OR_RETURN(int32_t window, gguf_window(c, even_layers_slide));
  if (window > 0) gguf_set_u32(w, c, names::kSlidingWindow, window);
  if (c.rope_scaling.type == RopeScalingType::kYarn && c.rope_scaling.yarn_truncate)
    return unsupported(
        "convert: gpt-oss's GGUF files imply YaRN without truncation (truncate "
        "false); this config truncates");
  return Status::ok();
}

}  // namespace

const ArchSpec kGptOss = {
    .name = "gpt-oss",
    .hf_model_types = {"gpt_oss"},
    .gguf_rope_style = RopeStyle::kNeox,
    .qkv_bias = TensorNeed::kRequired,
    .qk_norm = TensorNeed::kAbsent,
    .layer_tensors = kNames,
    .read_hf = read_hf,
    .read_gguf = read_gguf,
    .write_gguf = write_gguf,
    .defaults = {.qkv_bias = true,
                 .qk_norm = false,
                 .rope_theta = 150000.0f,
                 .rms_eps = 1e-5f,
                 .tied_embeddings = false},
};

}  // namespace loom::archs
