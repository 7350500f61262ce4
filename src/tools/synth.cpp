#include "tools/synth.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "base/log.h"
#include "base/thread_pool.h"
#include "format/file_type.h"
#include "format/gguf.h"
#include "kernels/quant.h"
#include "model/arch.h"
#include "model/config_reader.h"
#include "model/tensor_names.h"
#include "model/tensor_plan.h"
#include "tools/gguf_build.h"
#include "tools/synth_presets.h"
#include "tools/synth_vocab.h"

namespace loom {
namespace {

// ---- deterministic random numbers ------------------------------------------------------------

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return h;
}

// xoshiro256**: fast, good enough for weights, and seeded per chunk so chunks can be filled
// in any order by any thread.
class Xoshiro {
 public:
  explicit Xoshiro(uint64_t seed) {
    for (auto& w : s_) w = splitmix64(seed);
  }
  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Approximately standard normal: the sum of four 16-bit uniforms (Irwin-Hall), rescaled to
  // unit variance. Bounded by ±3.46, which keeps random models free of outliers.
  float normal() {
    const uint64_t r = next();
    const uint32_t sum =
        static_cast<uint32_t>(r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48);
    constexpr float kScale = 1.7320508f / 65536.0f;  // sqrt(3) / 2^16
    return (static_cast<float>(sum) + 2.0f - 131072.0f) * kScale;
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

// ---- the plan: tensors and metadata -------------------------------------------------------------

// kClsFromEmbd: a reranker's cls.output, the token embedding's rows of Plan::cls_tokens (as
// llama.cpp's converter takes them from a tied LM head).
enum class Init { kMatrix, kNorm, kBias, kRopeFreqs, kClsFromEmbd, kDecayRate };

constexpr float kMatrixStd = 0.02f;  // GPT-2 / Llama init scale
constexpr float kNormStd = 0.02f;    // norms = 1 ± small noise
constexpr float kBiasStd = 0.02f;

struct Plan {
  const SynthPreset* preset = nullptr;
  const ArchSpec* arch = nullptr;
  std::vector<std::pair<std::string, GgufValue>> kv;
  std::vector<PlannedTensor> tensors;
  std::vector<Init> init;
  FallbackNotes fallbacks;
  uint64_t seed = 0;
  SynthReport report;
  std::vector<int64_t> cls_tokens;  // "yes", "no" (rerank_head presets)
};

Status add_tensor(Plan& p, std::string name, Dtype want, std::vector<int64_t> ne, Init init) {
  Dtype t = want;
  if (ne.size() == 1 || init != Init::kMatrix) {
    t = Dtype::kF32;
  } else {
    t = fit_matrix_type(want, ne[0]);
    if (t != want) p.fallbacks.add(ne[0], want, t);
  }
  LOOM_ASSIGN_OR_RETURN(PlannedTensor pt, plan_tensor(std::move(name), t, std::move(ne)));
  uint64_t n = 1;
  for (int64_t d : pt.ne) n *= static_cast<uint64_t>(d);
  p.report.n_params += n;
  p.tensors.push_back(std::move(pt));
  p.init.push_back(init);
  return Status::ok();
}

// The ModelConfig a loader reads from this metadata (through the architecture's own reader).
Result<ModelConfig> config_of(const std::vector<std::pair<std::string, GgufValue>>& kv) {
  GgufWriter w;
  for (const auto& [k, v] : kv)
    if (k.rfind("tokenizer.", 0) != 0) w.set(k, v);  // the vocabulary is not needed here
  LOOM_ASSIGN_OR_RETURN(auto bytes, build_gguf_bytes(std::move(w), {}, {}));
  LOOM_ASSIGN_OR_RETURN(GgufFile f, GgufFile::parse_bytes(bytes));
  return config_from_gguf(f);
}

Result<SynthVocab> choose_vocab(const SynthOptions& o, const SynthPreset& preset,
                                const ArchSpec& arch, SynthReport& report) {
  const int32_t pad_to = preset.vocab_size_fixed ? preset.n_vocab : 0;
  if (!o.vocab_path.empty()) return load_synth_vocab(o.vocab_path, pad_to);
  if (!preset.vocab_fixture.empty()) {
    std::string path = find_vocab_fixture(preset.vocab_fixture);
    if (!path.empty()) return load_synth_vocab(path, pad_to);
    report.notes.push_back("vocabulary " + std::string(preset.vocab_fixture) +
                           " not found (set LOOM_VOCAB_DIR or pass --vocab); using a placeholder");
  }
  // llama.cpp's vocabulary loader looks up <|endoftext|> in every file it takes for Phi-3
  // (its name says phi3; real Phi-3 vocabularies have it) and fails without one.
  std::vector<std::string_view> control(preset.control_tokens.begin(), preset.control_tokens.end());
  if (arch.name == "phi3" &&
      std::find(control.begin(), control.end(), "<|endoftext|>") == control.end())
    control.push_back("<|endoftext|>");
  return placeholder_vocab(preset.n_vocab, control);
}

Result<Plan> make_plan(const SynthOptions& o) {
  Plan p;
  p.preset = find_synth_preset(o.preset);
  if (!p.preset) {
    std::string list;
    for (auto n : synth_preset_names()) list += (list.empty() ? "" : ", ") + std::string(n);
    return invalid_argument("unknown synth preset '" + o.preset + "' (choose one of: " + list +
                            ")");
  }
  p.arch = find_arch(o.arch);
  if (!p.arch)
    return invalid_argument("unknown synth arch '" + o.arch +
                            "' (choose one of: " + supported_arch_list() + ")");
  if (!is_synth_weight_type(o.type))
    return invalid_argument("synth cannot write weights of type " +
                            std::string(dtype_name(o.type)) +
                            " (use f32, f16, bf16, q8_0, q4_0, q4_k, q5_k or q6_k)");
  const SynthPreset& ps = *p.preset;
  const ArchSpec& ar = *p.arch;
  p.seed = o.seed;

  LOOM_ASSIGN_OR_RETURN(SynthVocab vocab, choose_vocab(o, ps, ar, p.report));
  p.report.n_vocab = vocab.n_vocab;
  p.report.vocab_source = vocab.source;
  if (vocab.placeholder && o.vocab_path.empty() && ps.vocab_fixture.empty() && ps.vocab_size_fixed)
    p.report.notes.push_back("no tokenizer fixture exists for preset " + std::string(ps.name) +
                             "; using a generated placeholder vocabulary");

  const float theta = ps.rope_theta > 0 ? ps.rope_theta : ar.defaults.rope_theta;
  const float eps = ps.rms_eps > 0 ? ps.rms_eps : ar.defaults.rms_eps;
  // Where llama.cpp's files cannot hold an LM head of their own, none is written.
  const bool tied =
      ar.gguf_head_is_embedding || ps.tied_embeddings.value_or(ar.defaults.tied_embeddings);
  const std::string a(ar.name);
  const int64_t E = ps.n_embd, D = ps.head_dim, F = ps.n_ff, V = vocab.n_vocab;

  struct Meta {
    std::vector<std::pair<std::string, GgufValue>>& kv;
    void set(std::string k, GgufValue v) { kv.emplace_back(std::move(k), std::move(v)); }
    void set_string(std::string k, std::string v) {
      set(std::move(k), GgufValue::of_string(std::move(v)));
    }
    void set_u32(std::string k, uint32_t v) {
      set(std::move(k), GgufValue::of_uint(GgufType::kU32, v));
    }
    void set_f32(std::string k, float v) {
      set(std::move(k), GgufValue::of_float(GgufType::kF32, v));
    }
  } m{p.kv};
  m.set_string(std::string(names::kGeneralArchitecture), a);
  m.set_string(std::string(names::kGeneralName),
               "loom-synth " + std::string(ps.name) + " (" + a + ")");
  m.set_string("general.description", "random weights from `loom synth` (seed " +
                                          std::to_string(o.seed) + "): not a trained model");
  m.set_u32(std::string(names::kGeneralFileType), gguf_file_type_for(o.type));
  if (dtype_info(o.type).quantized) m.set_u32("general.quantization_version", 2);
  auto key = [&](std::string_view suffix) { return names::arch_key(a, suffix); };
  m.set_u32(key(names::kVocabSize), static_cast<uint32_t>(V));
  m.set_u32(key(names::kContextLength), static_cast<uint32_t>(ps.context_length));
  m.set_u32(key(names::kEmbeddingLength), static_cast<uint32_t>(E));
  m.set_u32(key(names::kBlockCount), static_cast<uint32_t>(ps.n_layer + ps.n_mtp_layers));
  if (ps.n_mtp_layers > 0)
    m.set_u32(key(names::kNextnPredictLayers), static_cast<uint32_t>(ps.n_mtp_layers));
  m.set_u32(key(names::kFeedForwardLength), static_cast<uint32_t>(F));
  m.set_u32(key(names::kHeadCount), static_cast<uint32_t>(ps.n_head));
  if (ps.kv_lora_rank > 0) {  // as llama.cpp's deepseek2 converter describes MLA
    m.set_u32(key(names::kHeadCountKv), 1);
    m.set_u32(key(names::kKeyLength), static_cast<uint32_t>(ps.kv_lora_rank + ps.qk_rope_head_dim));
    m.set_u32(key(names::kValueLength), static_cast<uint32_t>(ps.kv_lora_rank));
    m.set_u32(key(names::kKeyLengthMla), static_cast<uint32_t>(D));
    m.set_u32(key(names::kValueLengthMla), static_cast<uint32_t>(ps.v_head_dim));
    if (ps.q_lora_rank > 0)
      m.set_u32(key(names::kQLoraRank), static_cast<uint32_t>(ps.q_lora_rank));
    m.set_u32(key(names::kKvLoraRank), static_cast<uint32_t>(ps.kv_lora_rank));
  } else {
    m.set_u32(key(names::kHeadCountKv), static_cast<uint32_t>(ps.n_head_kv));
    m.set_u32(key(names::kKeyLength), static_cast<uint32_t>(D));
    m.set_u32(key(names::kValueLength), static_cast<uint32_t>(D));
  }
  m.set_f32(key(names::kRmsEps), eps);
  m.set_f32(key(names::kRopeFreqBase), theta);
  m.set_u32(key(names::kRopeDimensionCount), static_cast<uint32_t>(ps.n_rot > 0 ? ps.n_rot : D));
  if (ps.sliding_window > 0)
    m.set_u32(key(names::kSlidingWindow), static_cast<uint32_t>(ps.sliding_window));
  for (const SynthPreset::Key& k : ps.keys)
    if (!k.suffix.empty()) m.set_f32(key(k.suffix), k.value);
  for (const ArchDefaults::Key& k : ar.defaults.keys) {  // the family's, where the preset is silent
    auto set = [&](const SynthPreset::Key& pk) { return pk.suffix == k.suffix; };
    if (k.suffix.empty() || std::any_of(ps.keys.begin(), ps.keys.end(), set)) continue;
    m.set_f32(key(k.suffix), k.value != 0 ? k.value : 1.0f / std::sqrt(static_cast<float>(D)));
  }
  if (ps.n_expert > 0) {
    m.set_u32(key(names::kExpertCount), static_cast<uint32_t>(ps.n_expert));
    m.set_u32(key(names::kExpertUsedCount), static_cast<uint32_t>(ps.n_expert_used));
    m.set_u32(key(names::kExpertFeedForwardLength), static_cast<uint32_t>(ps.n_ff_exp));
  }
  if (ps.n_ff_shexp > 0)
    m.set_u32(key(names::kExpertSharedFeedForwardLength), static_cast<uint32_t>(ps.n_ff_shexp));
  if (ps.ssm_v_heads > 0) {  // Gated DeltaNet layers, as llama.cpp's qwen3next / qwen35 say them
    m.set_u32(key(names::kSsmConvKernel), static_cast<uint32_t>(ps.ssm_conv_kernel));
    m.set_u32(key(names::kSsmStateSize), static_cast<uint32_t>(ps.ssm_d_k));
    m.set_u32(key(names::kSsmGroupCount), static_cast<uint32_t>(ps.ssm_k_heads));
    m.set_u32(key(names::kSsmTimeStepRank), static_cast<uint32_t>(ps.ssm_v_heads));
    m.set_u32(key(names::kSsmInnerSize), static_cast<uint32_t>(ps.ssm_v_heads * ps.ssm_d_v));
    std::vector<bool> recurrent(static_cast<size_t>(ps.n_layer + ps.n_mtp_layers), false);
    for (int l = 0; l < ps.n_layer; ++l) recurrent[l] = (l + 1) % ps.full_attention_interval != 0;
    m.set(key(names::kRecurrentLayers), GgufValue::of_bool_array(recurrent));
    m.set_u32(key(names::kFullAttentionInterval),
              static_cast<uint32_t>(ps.full_attention_interval));
    // Qwen3.5's interleaved multimodal RoPE: as loom convert writes it for a checkpoint
    // without mrope_section (transformers' 11, 11, 10 for 64 rotated dims).
    m.set(key(names::kRopeDimensionSections),
          GgufValue::of_int_array(
              GgufType::kI32, ModelConfig::text_rope_sections((ps.n_rot > 0 ? ps.n_rot : D) / 2)));
  }
  if (ps.n_expert > 0 && ps.kv_lora_rank > 0) {  // DeepSeek's router and layer pattern
    m.set_u32(key(names::kLeadingDenseBlockCount), static_cast<uint32_t>(ps.n_dense_lead));
    m.set_u32(key(names::kExpertSharedCount), static_cast<uint32_t>(ps.n_expert_shared));
    m.set_f32(key(names::kExpertWeightsScale), ps.expert_weights_scale);
    m.set(key(names::kExpertWeightsNorm), GgufValue::of_bool(true));
    m.set_u32(key(names::kExpertGatingFunc), 2);  // sigmoid
    m.set_u32(key(names::kExpertGroupCount), static_cast<uint32_t>(ps.n_expert_group));
    m.set_u32(key(names::kExpertGroupUsedCount), static_cast<uint32_t>(ps.n_expert_group_used));
  }
  const bool llama3_rope = ps.rope_scaling_factor > 0;
  if (llama3_rope) {
    m.set_string(key(names::kRopeScalingType), "llama3");
    m.set_f32(key(names::kRopeScalingFactor), ps.rope_scaling_factor);
    m.set_u32(key(names::kRopeScalingOrigCtx), static_cast<uint32_t>(ps.rope_original_context));
    m.set_f32(key(names::kRopeScalingLowFreqFactor), ps.rope_low_freq_factor);
    m.set_f32(key(names::kRopeScalingHighFreqFactor), ps.rope_high_freq_factor);
  }
  if (ps.yarn_factor > 0) {  // as llama.cpp's converter writes gpt-oss's
    m.set_string(key(names::kRopeScalingType), "yarn");
    m.set_f32(key(names::kRopeScalingFactor), ps.yarn_factor);
    m.set_u32(key(names::kRopeScalingOrigCtx), static_cast<uint32_t>(ps.yarn_original_context));
  }
  if (ps.pooling_type >= 0)
    m.set_u32(key(names::kPoolingType), static_cast<uint32_t>(ps.pooling_type));
  if (ps.rerank_head) {
    const GgufValue* tokens = nullptr;
    for (const auto& [k, v] : vocab.kv)
      if (k == names::kTokenizerTokens) tokens = &v;
    const std::vector<std::string>* list = tokens ? tokens->as_string_array() : nullptr;
    for (const char* label : {"yes", "no"}) {
      auto it = list ? std::find(list->begin(), list->end(), label) : list->end();
      if (!list || it == list->end())
        return invalid_argument("synth preset " + std::string(ps.name) +
                                " needs a vocabulary with the tokens \"yes\" and \"no\"");
      p.cls_tokens.push_back(it - list->begin());
    }
    m.set(key(names::kClassifierOutputLabels), GgufValue::of_string_array({"yes", "no"}));
    m.set_string(std::string(names::kRerankTemplate),
                 "<|im_start|>system\nJudge whether the Document meets the requirements based on "
                 "the Query and the Instruct provided. Note that the answer can only be \"yes\" "
                 "or \"no\".<|im_end|>\n<|im_start|>user\n<Instruct>: Given a web search "
                 "query, retrieve relevant passages that answer the query\n<Query>: "
                 "{query}\n<Document>: {document}<|im_end|>\n<|im_start|>assistant\n<think>"
                 "\n\n</think>\n\n");
  }
  m.set_string("loom.synth.preset", std::string(ps.name));
  m.set("loom.synth.seed", GgufValue::of_uint(GgufType::kU64, o.seed));
  m.set_string("loom.synth.vocab", vocab.source);
  for (auto& [k, v] : vocab.kv) m.set(k, std::move(v));

  // The tensors: the plan of the config a loader reads from this metadata (so synth and
  // loading cannot disagree), with the optional groups as the family sets them.
  LOOM_ASSIGN_OR_RETURN(ModelConfig c, config_of(p.kv));
  // An architecture whose reader takes no experts would get dense tensors beside expert keys
  // it ignores: a file that loads as some other, dense model.
  if (ps.n_expert > 0 && c.moe.n_expert == 0)
    return invalid_argument("preset '" + std::string(ps.name) + "' has " +
                            std::to_string(ps.n_expert) + " experts, but architecture '" + a +
                            "' cannot hold experts; use a Mixture-of-Experts architecture (the "
                            "preset's own is " +
                            std::string(ps.default_arch) + ")");
  auto group = [](TensorNeed need, bool family) {
    return need == TensorNeed::kRequired || (need == TensorNeed::kOptional && family);
  };
  c.qkv_bias = group(ar.qkv_bias, ar.defaults.qkv_bias);
  c.qk_norm = group(ar.qk_norm, ar.defaults.qk_norm);
  c.tied_embeddings = tied;
  c.n_vocab = static_cast<int32_t>(V);
  if (ps.rerank_head) c.n_cls_out = 2;
  c.moe.score_bias = c.moe.sigmoid_scores;  // DeepSeek-V3's correction bias (exp_probs_b)
  // MTP modules with their own head norm (as DeepSeek-V3's shared_head.norm), sharing the
  // model's embedding and LM head (as llama.cpp's converter leaves them out).
  c.mtp_own_norm = c.n_mtp_layers > 0;
  TensorPlanOptions po;
  po.rope_freqs = llama3_rope;
  for (const PlannedWeight& t : tensor_plan(c, po)) {
    // The recurrent layers' decay rate -exp(A_log) is negative (a state that decays) and their
    // gated norm multiplies by its weight as it is.
    const Init init = t.role == TensorRole::kClsOut    ? Init::kClsFromEmbd
                      : t.role == TensorRole::kSsmA    ? Init::kDecayRate
                      : t.role == TensorRole::kSsmNorm ? Init::kNorm
                      : t.kind == TensorKind::kMatrix  ? Init::kMatrix
                      : t.kind == TensorKind::kNorm    ? Init::kNorm
                      : t.kind == TensorKind::kBias    ? Init::kBias
                                                       : Init::kRopeFreqs;
    // Routers stay F32, as llama.cpp's quantizer leaves them.
    const bool quantized = init == Init::kMatrix && t.role != TensorRole::kRouter;
    const bool expert = t.role == TensorRole::kGateExps || t.role == TensorRole::kUpExps ||
                        t.role == TensorRole::kDownExps || t.role == TensorRole::kGateUpExps;
    LOOM_RETURN_IF_ERROR(add_tensor(
        p, t.name, quantized ? matrix_type_for(o.type, expert) : Dtype::kF32, t.ne, init));
  }
  for (auto& line : p.fallbacks.lines()) p.report.notes.push_back(std::move(line));
  return p;
}

// Fills every tensor of the plan; values depend only on (seed, tensor name, chunk), so every
// dtype of the same seed starts from the same floats.
Status fill_tensor(const Plan& p, ThreadPool& pool, size_t i, uint8_t* dst);

// cls.output: the token embedding's rows of the classifier's tokens, re-encoded in its type.
Status fill_cls_from_embd(const Plan& p, ThreadPool& pool, const PlannedTensor& t, uint8_t* dst) {
  size_t e = 0;
  while (e < p.tensors.size() && p.tensors[e].name != names::kTokenEmbd) ++e;
  if (e == p.tensors.size()) return internal_error("synth: no token_embd for cls.output");
  const PlannedTensor& embd = p.tensors[e];
  std::vector<uint8_t> buf(embd.nbytes);
  LOOM_RETURN_IF_ERROR(fill_tensor(p, pool, e, buf.data()));
  const int64_t cols = t.ne[0];
  const uint64_t embd_rb = embd.nbytes / static_cast<uint64_t>(embd.ne[1]);
  const uint64_t rb = t.nbytes / static_cast<uint64_t>(t.ne[1]);
  std::vector<float> row(static_cast<size_t>(cols));
  for (size_t j = 0; j < p.cls_tokens.size(); ++j) {
    kernels::dequantize_row(embd.dtype, buf.data() + p.cls_tokens[j] * embd_rb, row.data(), cols);
    LOOM_RETURN_IF_ERROR(encode_rows(t.dtype, row.data(), dst + j * rb, 1, cols));
  }
  return Status::ok();
}

TensorFillFn make_fill(const Plan& p, ThreadPool& pool) {
  return [&p, &pool](size_t i, uint8_t* dst) { return fill_tensor(p, pool, i, dst); };
}

Status fill_tensor(const Plan& p, ThreadPool& pool, size_t i, uint8_t* dst) {
  {
    const PlannedTensor& t = p.tensors[i];
    if (p.init[i] == Init::kClsFromEmbd) return fill_cls_from_embd(p, pool, t, dst);
    const int64_t cols = t.ne[0];
    int64_t rows = 1;
    for (size_t d = 1; d < t.ne.size(); ++d) rows *= t.ne[d];
    const Init init = p.init[i];
    if (init == Init::kRopeFreqs) {
      const float theta =
          p.preset->rope_theta > 0 ? p.preset->rope_theta : p.arch->defaults.rope_theta;
      const SynthPreset& ps = *p.preset;
      std::vector<float> v = llama3_rope_freq_divisors(
          ps.head_dim, theta, ps.rope_scaling_factor, ps.rope_low_freq_factor,
          ps.rope_high_freq_factor, ps.rope_original_context);
      return encode_rows(t.dtype, v.data(), dst, 1, cols);
    }
    uint64_t s = p.seed ^ fnv1a(t.name);
    const uint64_t tensor_seed = splitmix64(s);
    const uint64_t rb = t.nbytes / static_cast<uint64_t>(rows);
    std::vector<std::vector<float>> scratch(static_cast<size_t>(pool.size()));
    return parallel_row_chunks(
        pool, rows, cols, [&](int64_t chunk, int64_t r0, int64_t nr, int thread) {
          std::vector<float>& buf = scratch[static_cast<size_t>(thread)];
          buf.resize(static_cast<size_t>(nr * cols));
          Xoshiro rng(tensor_seed + static_cast<uint64_t>(chunk) * 0x9e3779b97f4a7c15ull);
          const size_t n = buf.size();
          switch (init) {
            case Init::kMatrix:
              for (size_t k = 0; k < n; ++k) buf[k] = kMatrixStd * rng.normal();
              break;
            case Init::kNorm:
              for (size_t k = 0; k < n; ++k) buf[k] = 1.0f + kNormStd * rng.normal();
              break;
            case Init::kDecayRate:  // -exp(A_log), A_log around 0 as Qwen3-Next's
              for (size_t k = 0; k < n; ++k) buf[k] = -std::exp(0.5f * rng.normal());
              break;
            default:
              for (size_t k = 0; k < n; ++k) buf[k] = kBiasStd * rng.normal();
              break;
          }
          return encode_rows(t.dtype, buf.data(), dst + static_cast<uint64_t>(r0) * rb, nr, cols);
        });
  }
}

GgufWriter make_writer(const Plan& p) {
  GgufWriter w;
  for (const auto& [k, v] : p.kv) w.set(k, v);
  return w;
}

void finish_report(const Plan& p, uint64_t n_bytes, SynthReport* report) {
  for (const auto& n : p.report.notes) LOOM_LOG_DEBUG("synth: %s", n.c_str());
  if (!report) return;
  *report = p.report;
  report->n_bytes = n_bytes;
}

}  // namespace

std::vector<float> llama3_rope_freq_divisors(int head_dim, float theta, float factor,
                                             float low_freq_factor, float high_freq_factor,
                                             int original_context) {
  const double low_wavelen = original_context / low_freq_factor;
  const double high_wavelen = original_context / high_freq_factor;
  std::vector<float> out(static_cast<size_t>(head_dim / 2));
  for (size_t i = 0; i < out.size(); ++i) {
    const double freq =
        std::pow(static_cast<double>(theta), -2.0 * static_cast<double>(i) / head_dim);
    const double wavelen = 2.0 * M_PI / freq;
    double d;
    if (wavelen < high_wavelen) {
      d = 1.0;
    } else if (wavelen > low_wavelen) {
      d = factor;
    } else {
      const double smooth =
          (original_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      d = 1.0 / ((1.0 - smooth) / factor + smooth);
    }
    out[i] = static_cast<float>(d);
  }
  return out;
}

bool is_synth_weight_type(Dtype t) {
  switch (t) {
    case Dtype::kF32:
    case Dtype::kF16:
    case Dtype::kBF16:
    case Dtype::kQ8_0:
    case Dtype::kQ4_0:
    case Dtype::kQ4_K:
    case Dtype::kQ5_K:
    case Dtype::kQ6_K:
    case Dtype::kMXFP4:
    case Dtype::kIQ4_NL:
    case Dtype::kIQ4_XS:
      return true;
    default:
      return false;
  }
}

Dtype fit_matrix_type(Dtype want, int64_t cols) {
  if (row_bytes(want, cols)) return want;
  if (want == Dtype::kIQ4_XS && row_bytes(Dtype::kIQ4_NL, cols)) return Dtype::kIQ4_NL;
  if ((want == Dtype::kTQ1_0 || want == Dtype::kTQ2_0) && row_bytes(Dtype::kQ4_0, cols))
    return Dtype::kQ4_0;
  if (row_bytes(Dtype::kQ8_0, cols)) return Dtype::kQ8_0;
  return Dtype::kF16;
}

Dtype matrix_type_for(Dtype file_type, bool expert) {
  if (file_type != Dtype::kMXFP4) return file_type;
  return expert ? Dtype::kMXFP4 : Dtype::kQ8_0;
}

uint32_t gguf_file_type_for(Dtype t) {
  // The llama_ftype naming files whose matrices are all t: the "_S" mixes for the K-quants
  // (mostly that type, without the _M upgrades), MXFP4_MOE for MXFP4 (see matrix_type_for).
  std::string_view name;
  switch (t) {
    case Dtype::kQ3_K:
      name = "Q3_K_S";
      break;
    case Dtype::kQ4_K:
      name = "Q4_K_S";
      break;
    case Dtype::kQ5_K:
      name = "Q5_K_S";
      break;
    case Dtype::kMXFP4:
      name = "MXFP4_MOE";
      break;
    default: {  // the type's own name: "Q8_0", "IQ4_XS", ... (ALL_F32 for one with none)
      std::string upper(dtype_name(t));
      for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      return static_cast<uint32_t>(file_type_value(upper).value_or(0));
    }
  }
  return static_cast<uint32_t>(file_type_value(name).value_or(0));
}

Result<std::shared_ptr<std::vector<uint8_t>>> synth_model_bytes(const SynthOptions& options,
                                                                SynthReport* report) {
  LOOM_ASSIGN_OR_RETURN(Plan p, make_plan(options));
  ThreadPool pool(0);
  LOOM_ASSIGN_OR_RETURN(auto bytes,
                        build_gguf_bytes(make_writer(p), p.tensors, make_fill(p, pool)));
  finish_report(p, bytes->size(), report);
  return bytes;
}

Status synth_model_file(const SynthOptions& options, const std::string& path, SynthReport* report) {
  LOOM_ASSIGN_OR_RETURN(Plan p, make_plan(options));
  ThreadPool pool(0);
  LOOM_RETURN_IF_ERROR(build_gguf_file(make_writer(p), p.tensors, make_fill(p, pool), path));
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);  // header + padding + data
  finish_report(p, size, report);
  return Status::ok();
}

Result<SynthLayout> synth_layout(const SynthOptions& options) {
  LOOM_ASSIGN_OR_RETURN(Plan p, make_plan(options));
  SynthLayout l;
  l.metadata = std::move(p.kv);
  l.tensors = std::move(p.tensors);
  l.report = std::move(p.report);
  return l;
}

Result<GgufFile> synth_layout_gguf(const SynthOptions& options) {
  LOOM_ASSIGN_OR_RETURN(Plan p, make_plan(options));
  return build_gguf_layout(make_writer(p), p.tensors);
}

Result<SynthOptions> parse_synth_spec(std::string_view spec) {
  constexpr std::string_view kPrefix = "synth:";
  if (spec.substr(0, kPrefix.size()) != kPrefix)
    return invalid_argument("not a synth spec (expected synth:PRESET[:TYPE]): " +
                            std::string(spec));
  std::string_view rest = spec.substr(kPrefix.size());
  std::string_view preset = rest, type;
  if (auto colon = rest.find(':'); colon != std::string_view::npos) {
    preset = rest.substr(0, colon);
    type = rest.substr(colon + 1);
  }
  const SynthPreset* ps = find_synth_preset(preset);
  if (!ps) {
    std::string list;
    for (auto n : synth_preset_names()) list += (list.empty() ? "" : ", ") + std::string(n);
    return invalid_argument("unknown synth preset '" + std::string(preset) + "' in " +
                            std::string(spec) + " (choose one of: " + list + ")");
  }
  SynthOptions o;
  o.preset = std::string(preset);
  o.arch = std::string(ps->default_arch);
  if (!type.empty()) {
    auto t = parse_dtype(type);
    if (!t || !is_synth_weight_type(*t))
      return invalid_argument("bad weight type '" + std::string(type) + "' in " +
                              std::string(spec) +
                              " (use f32, f16, bf16, q8_0, q4_0, q4_k, q5_k or q6_k)");
    o.type = *t;
  }
  return o;
}

}  // namespace loom
