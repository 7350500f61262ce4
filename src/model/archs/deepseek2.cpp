// DeepSeek-V3 (HF deepseek_v3, GGUF deepseek2): Multi-head Latent Attention in every layer
// (LayerSpec::mla: a low-rank query path, one latent row plus a shared RoPE key cached per
// token, interleaved-pair RoPE on the rope part), the first first_k_dense_replace layers with a
// dense FFN and the others Mixture-of-Experts with DeepSeek's router (sigmoid scores, a
// correction bias for choosing, group-limited top-k, routed_scaling_factor) and shared experts
// fused into one FFN. GGUF files are laid out as llama.cpp's converter writes them (kv_b_proj
// split into attn_k_b / attn_v_b; key_length / value_length describe the latent row and the
// _mla keys the heads); older files' unsplit attn_kv_b is split at load (model/bind.cpp).
#include <cmath>

#include "model/archs/archs.h"
#include "model/tensor_names.h"

namespace loom::archs {
namespace {

constexpr LayerTensorName kNames[] = {
    {"input_layernorm.weight", names::kAttnNorm},
    {"self_attn.q_proj.weight", names::kAttnQ},
    {"self_attn.q_a_proj.weight", names::kAttnQA},
    {"self_attn.q_a_layernorm.weight", names::kAttnQANorm},
    {"self_attn.q_b_proj.weight", names::kAttnQB},
    {"self_attn.kv_a_proj_with_mqa.weight", names::kAttnKvAMqa},
    {"self_attn.kv_a_layernorm.weight", names::kAttnKvANorm},
    {"self_attn.kv_b_proj.weight#kb", names::kAttnKB},
    {"self_attn.kv_b_proj.weight#vb", names::kAttnVB},
    {"self_attn.o_proj.weight", names::kAttnOutput},
    {"post_attention_layernorm.weight", names::kFfnNorm},
    {"mlp.gate_proj.weight", names::kFfnGate},
    {"mlp.up_proj.weight", names::kFfnUp},
    {"mlp.down_proj.weight", names::kFfnDown},
    {"mlp.gate.weight", names::kFfnGateInp},
    {"mlp.gate.e_score_correction_bias", names::kFfnExpProbsB},
    {"mlp.experts.{e}.gate_proj.weight", names::kFfnGateExps},
    {"mlp.experts.{e}.up_proj.weight", names::kFfnUpExps},
    {"mlp.experts.{e}.down_proj.weight", names::kFfnDownExps},
    {"mlp.shared_experts.gate_proj.weight", names::kFfnGateShexp},
    {"mlp.shared_experts.up_proj.weight", names::kFfnUpShexp},
    {"mlp.shared_experts.down_proj.weight", names::kFfnDownShexp},
    // The multi-token prediction module's own tensors (model.layers.{num_hidden_layers}.*).
    {"eh_proj.weight", names::kNextnEhProj},
    {"enorm.weight", names::kNextnEnorm},
    {"hnorm.weight", names::kNextnHnorm},
    {"shared_head.norm.weight", names::kNextnHeadNorm},
    {"shared_head.head.weight", names::kNextnHead},
    {"embed_tokens.weight", names::kNextnEmbed},
};

constexpr uint32_t kGatingSoftmax = 1, kGatingSigmoid = 2;  // llama.cpp's expert_gating_func

// YaRN's softmax-scale correction, as transformers' yarn_get_mscale: 1 + yarn_log_mul·ln(factor)
// for factor > 1.
double yarn_mscale(const RopeScaling& s) {
  if (s.type != RopeScalingType::kYarn || s.factor <= 1.0f || s.yarn_log_mul == 0) return 1.0;
  return 1.0 + s.yarn_log_mul * std::log(static_cast<double>(s.factor));
}

// What both formats share once the sizes are read: the layer pattern, head sizes, the softmax
// scale and the checks.
Status finish(ModelConfig& c, int32_t first_dense, int32_t moe_every, const std::string& source) {
  const MlaConfig& a = c.mla;
  if (a.kv_lora_rank < 1 || a.qk_rope_head_dim < 2 || a.qk_rope_head_dim % 2 != 0 ||
      a.qk_nope_head_dim < 0 || a.v_head_dim < 1 || a.q_lora_rank < 0 || a.kv_lora_rank > 65536 ||
      a.q_lora_rank > 65536 || a.qk_nope_head_dim > 1024 || a.v_head_dim > 1024 ||
      a.qk_rope_head_dim > 1024)
    return invalid_file(
        source + ": MLA sizes out of range (kv_lora_rank " + std::to_string(a.kv_lora_rank) +
        ", qk_rope_head_dim " + std::to_string(a.qk_rope_head_dim) + ", qk_nope_head_dim " +
        std::to_string(a.qk_nope_head_dim) + ", v_head_dim " + std::to_string(a.v_head_dim) + ")");
  c.head_dim = a.qk_nope_head_dim + a.qk_rope_head_dim;
  c.n_rot = a.qk_rope_head_dim;
  c.n_head_kv = c.n_head;  // every head has its own key and value, decompressed from the latent
  const double mscale = yarn_mscale(c.rope_scaling);
  c.attn_scale = static_cast<float>(mscale * mscale / std::sqrt(static_cast<double>(c.head_dim)));
  if (first_dense < 0 || first_dense > c.n_layer || moe_every < 1)
    return invalid_file(source + ": first_k_dense_replace / moe_layer_freq out of range");
  // The multi-token prediction modules' blocks continue the pattern (DeepSeek-V3's layer 61:
  // MLA and experts).
  c.mtp_layers.assign(c.n_mtp_layers, LayerSpec{});
  c.mtp_zero_embedding_at_start = true;  // vLLM's deepseek_mtp
  // The module reads the target's state after its final norm, as vLLM (DeepseekV2Model returns
  // it normed) and SGLang (deepseek_nextn) pass it.
  c.mtp_hidden_after_norm = true;
  for (int l = 0; l < c.n_layer + c.n_mtp_layers; ++l) {
    LayerSpec& s = l < c.n_layer ? c.layers[l] : c.mtp_layers[l - c.n_layer];
    s.mla = true;
    s.moe = c.moe.n_expert > 0 && l >= first_dense && l % moe_every == 0;
  }
  const MoeConfig& m = c.moe;
  if (m.n_expert > 0 &&
      (m.n_group < 1 || m.n_expert % m.n_group != 0 || m.topk_group < 1 ||
       m.topk_group > m.n_group || m.n_expert_used > m.topk_group * (m.n_expert / m.n_group)))
    return invalid_file(source + ": expert groups out of range (" + std::to_string(m.n_group) +
                        " groups, " + std::to_string(m.topk_group) + " used, " +
                        std::to_string(m.n_expert) + " experts, top-" +
                        std::to_string(m.n_expert_used) + ")");
  if (m.n_expert > 0 && m.n_group > 1 && !m.sigmoid_scores)
    return unsupported(source + ": group-limited routing with softmax scores is not supported");
  return Status::ok();
}

Status read_hf(const nlohmann::json& j, ModelConfig& c) {
  auto integer = [&](const char* key, int64_t def, int32_t* out) -> Status {
    LOOM_ASSIGN_OR_RETURN(auto v, hf_number(j, key));
    if (!v) {
      if (def < 0) return invalid_file("config.json: " + c.arch + " without \"" + key + "\"");
      *out = static_cast<int32_t>(def);
      return Status::ok();
    }
    if (*v < 0 || *v > INT32_MAX || *v != std::floor(*v))
      return invalid_file(std::string("config.json: \"") + key + "\" must be a whole number");
    *out = static_cast<int32_t>(*v);
    return Status::ok();
  };
  MlaConfig& a = c.mla;
  LOOM_RETURN_IF_ERROR(integer("q_lora_rank", 0, &a.q_lora_rank));
  LOOM_RETURN_IF_ERROR(integer("kv_lora_rank", -1, &a.kv_lora_rank));
  LOOM_RETURN_IF_ERROR(integer("qk_nope_head_dim", -1, &a.qk_nope_head_dim));
  LOOM_RETURN_IF_ERROR(integer("qk_rope_head_dim", -1, &a.qk_rope_head_dim));
  LOOM_RETURN_IF_ERROR(integer("v_head_dim", -1, &a.v_head_dim));
  // transformers' DeepseekV3Attention applies the rope part interleaved unless told otherwise.
  auto interleave = j.find("rope_interleave");
  c.rope_style = interleave == j.end() || !interleave->is_boolean() || interleave->get<bool>()
                     ? RopeStyle::kInterleaved
                     : RopeStyle::kNeox;

  // Keys a config.json leaves out take DeepseekV3Config's defaults (transformers), as the
  // reference does: 1 shared expert, 8 groups of which 4 are used, 3 leading dense layers,
  // routed_scaling_factor 2.5, norm_topk_prob true.
  MoeConfig& m = c.moe;
  LOOM_RETURN_IF_ERROR(integer("n_routed_experts", 0, &m.n_expert));
  int32_t first_dense = 0, moe_every = 1;
  if (m.n_expert > 0) {
    LOOM_RETURN_IF_ERROR(integer("num_experts_per_tok", -1, &m.n_expert_used));
    LOOM_RETURN_IF_ERROR(integer("moe_intermediate_size", -1, &m.n_ff_exp));
    LOOM_RETURN_IF_ERROR(integer("n_shared_experts", 1, &m.n_shared));
    LOOM_RETURN_IF_ERROR(integer("n_group", 8, &m.n_group));
    LOOM_RETURN_IF_ERROR(integer("topk_group", 4, &m.topk_group));
    LOOM_RETURN_IF_ERROR(integer("first_k_dense_replace", 3, &first_dense));
    LOOM_RETURN_IF_ERROR(integer("moe_layer_freq", 1, &moe_every));
    LOOM_ASSIGN_OR_RETURN(auto scale, hf_number(j, "routed_scaling_factor"));
    m.weights_scale = static_cast<float>(scale.value_or(2.5));
    auto norm = j.find("norm_topk_prob");
    m.norm_topk = norm == j.end() || !norm->is_boolean() || norm->get<bool>();
    LOOM_ASSIGN_OR_RETURN(const std::string scoring, hf_string(j, "scoring_func", "sigmoid"));
    LOOM_ASSIGN_OR_RETURN(const std::string method, hf_string(j, "topk_method", "noaux_tc"));
    if (scoring != "sigmoid" || method != "noaux_tc")
      return unsupported("config.json: deepseek_v3 routing scoring_func \"" + scoring +
                         "\" / topk_method \"" + method +
                         "\" is not supported (sigmoid / noaux_tc)");
    m.sigmoid_scores = true;
    m.score_bias = true;
    m.n_ff_shexp = m.n_ff_exp * m.n_shared;
    if (m.n_expert_used < 1 || m.n_expert_used > m.n_expert || m.n_ff_exp < 1 || m.n_expert > 4096)
      return invalid_file("config.json: expert counts and sizes out of range");
  }
  return finish(c, first_dense, moe_every, "config.json");
}

Status read_gguf(const GgufFile& f, ModelConfig& c) {
  auto get = [&](std::string_view suffix, int64_t def) {
    return static_cast<int32_t>(gguf_int(f, c, suffix).value_or(def));
  };
  MlaConfig& a = c.mla;
  a.kv_lora_rank = get(names::kKvLoraRank, 0);
  if (a.kv_lora_rank <= 0)
    return invalid_file("GGUF: deepseek2 without " + names::arch_key(c.arch, names::kKvLoraRank));
  a.q_lora_rank = get(names::kQLoraRank, 0);
  a.qk_rope_head_dim = c.n_rot;
  // Files from llama.cpp's MLA converter describe the latent row with key_length /
  // value_length and the heads with the _mla keys; older ones the heads directly.
  const int32_t key_len = get(names::kKeyLengthMla, c.head_dim);
  a.v_head_dim = get(names::kValueLengthMla, get(names::kValueLength, c.head_dim));
  a.qk_nope_head_dim = key_len - a.qk_rope_head_dim;
  // A file storing attn_kv_b unsplit (llama.cpp's converter before its MLA support) is split
  // into attn_k_b / attn_v_b at load (model/mla_kv_b.h), as llama.cpp still loads it.

  MoeConfig& m = c.moe;
  int32_t first_dense = 0;
  if (gguf_int(f, c, names::kExpertCount).value_or(0) > 0) {
    LOOM_RETURN_IF_ERROR(gguf_moe(f, c, {.norm_default = false, .shared = GgufMoe::Shared::kNone}));
    m.n_shared = get(names::kExpertSharedCount, 0);
    m.n_ff_shexp = m.n_ff_exp * m.n_shared;
    m.shexp_gate = false;
    m.weights_scale = static_cast<float>(gguf_float(f, c, names::kExpertWeightsScale).value_or(1));
    const int32_t gating = get(names::kExpertGatingFunc, kGatingSoftmax);
    if (gating != kGatingSoftmax && gating != kGatingSigmoid)
      return unsupported("GGUF: " + names::arch_key(c.arch, names::kExpertGatingFunc) + " " +
                         std::to_string(gating) + " is not supported (1 softmax, 2 sigmoid)");
    m.sigmoid_scores = gating == kGatingSigmoid;
    m.n_group = std::max(1, get(names::kExpertGroupCount, 1));
    m.topk_group = std::max(1, get(names::kExpertGroupUsedCount, m.n_group));
    first_dense = get(names::kLeadingDenseBlockCount, 0);
    const int32_t first_moe = std::min(first_dense, c.n_layer - 1);
    m.score_bias = f.find_tensor(names::layer_tensor(first_moe, names::kFfnExpProbsB)) != nullptr;
  }
  RopeScaling& s = c.rope_scaling;
  if (s.type == RopeScalingType::kYarn) {
    // llama.cpp's deepseek2 rotates with an attention factor that cancels YaRN's own, so cos
    // and sin are unscaled; the log multiplier scales the softmax instead.
    s.attn_factor = 1.0f;
    s.yarn_log_mul =
        static_cast<float>(gguf_float(f, c, names::kRopeScalingYarnLogMul).value_or(0));
  }
  return finish(c, first_dense, 1, "GGUF");
}

Status write_gguf(GgufWriter& w, const ModelConfig& c) {
  const MlaConfig& a = c.mla;
  if (c.rope_style != RopeStyle::kInterleaved)
    return unsupported(
        "convert: deepseek2 GGUF files rotate interleaved pairs; this config sets "
        "rope_interleave false");
  if (c.rope_scaling.type == RopeScalingType::kYarn && c.rope_scaling.attn_factor != 1.0f)
    return unsupported(
        "convert: llama.cpp's deepseek2 cannot say a YaRN attention factor other than 1 "
        "(mscale must equal mscale_all_dim)");
  gguf_set_u32(w, c, names::kHeadCountKv, 1);
  gguf_set_u32(w, c, names::kKeyLength, a.latent_row());
  gguf_set_u32(w, c, names::kValueLength, a.kv_lora_rank);
  gguf_set_u32(w, c, names::kKeyLengthMla, c.head_dim);
  gguf_set_u32(w, c, names::kValueLengthMla, a.v_head_dim);
  if (a.q_lora_rank > 0) gguf_set_u32(w, c, names::kQLoraRank, a.q_lora_rank);
  gguf_set_u32(w, c, names::kKvLoraRank, a.kv_lora_rank);
  if (c.rope_scaling.type == RopeScalingType::kYarn && c.rope_scaling.yarn_log_mul != 0)
    gguf_set_f32(w, c, names::kRopeScalingYarnLogMul, c.rope_scaling.yarn_log_mul);
  const MoeConfig& m = c.moe;
  if (m.n_expert == 0) return Status::ok();
  int32_t first_dense = 0;
  while (first_dense < c.n_layer && !c.layers[first_dense].moe) ++first_dense;
  for (int l = first_dense; l < c.n_layer; ++l)
    if (!c.layers[l].moe)
      return unsupported("convert: layer " + std::to_string(l) +
                         " is dense after MoE layers; llama.cpp's deepseek2 files make every "
                         "layer after the leading dense ones MoE (moe_layer_freq 1)");
  gguf_set_u32(w, c, names::kLeadingDenseBlockCount, first_dense);
  gguf_set_u32(w, c, names::kExpertCount, m.n_expert);
  gguf_set_u32(w, c, names::kExpertUsedCount, m.n_expert_used);
  gguf_set_u32(w, c, names::kExpertFeedForwardLength, m.n_ff_exp);
  gguf_set_u32(w, c, names::kExpertSharedCount, m.n_shared);
  gguf_set_f32(w, c, names::kExpertWeightsScale, m.weights_scale);
  w.set_bool(names::arch_key(c.arch, names::kExpertWeightsNorm), m.norm_topk);
  gguf_set_u32(w, c, names::kExpertGatingFunc, m.sigmoid_scores ? kGatingSigmoid : kGatingSoftmax);
  gguf_set_u32(w, c, names::kExpertGroupCount, m.n_group);
  gguf_set_u32(w, c, names::kExpertGroupUsedCount, m.topk_group);
  return Status::ok();
}

}  // namespace

const ArchSpec kDeepseek2 = {
    .name = "deepseek2",
    .hf_model_types = {"deepseek_v3"},
    .gguf_rope_style = RopeStyle::kInterleaved,
    .qkv_bias = TensorNeed::kAbsent,
    .qk_norm = TensorNeed::kAbsent,
    .fused_gate_up_exps = TensorNeed::kOptional,
    .layer_tensors = kNames,
    .read_hf = read_hf,
    .read_gguf = read_gguf,
    .write_gguf = write_gguf,
    .defaults = {.qkv_bias = false,
                 .qk_norm = false,
                 .rope_theta = 10000.0f,
                 .rms_eps = 1e-6f,
                 .tied_embeddings = false},
};

}  // namespace loom::archs
