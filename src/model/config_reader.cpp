// GGUF / config.json → ModelConfig.
#include "model/config_reader.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "base/json_depth.h"
#include "model/arch.h"
#include "model/archs/archs.h"
#include "model/pooling_config.h"
#include "model/tensor_names.h"

namespace loom {

float yarn_default_attn_factor(float factor) {
  return factor <= 1.0f ? 1.0f : static_cast<float>(0.1 * std::log(factor) + 1.0);
}

namespace {

using names::arch_key;

// Per-layer tables are sized by the layer count before any tensor is checked: far beyond any
// real model (a few hundred layers) is a broken file.
constexpr int32_t kMaxLayers = 4096;

// LongRoPE from config.json: short/long factor lists, the original context, and the
// attention factor (given, or √(1 + ln(factor) / ln(original)) as transformers computes it,
// factor = max_position_embeddings / original_max_position_embeddings unless given).
Status read_longrope(const nlohmann::json& j, const nlohmann::json& rp, const std::string& source,
                     ModelConfig& c) {
  RopeScaling& s = c.rope_scaling;
  s.type = RopeScalingType::kLongRope;
  for (auto [key, out] :
       {std::pair{"short_factor", &s.short_factor}, {"long_factor", &s.long_factor}}) {
    auto it = rp.find(key);
    if (it == rp.end() || !it->is_array() || it->empty())
      return invalid_file(source + ": longrope needs a \"" + key + "\" list");
    for (const auto& v : *it) {
      if (!v.is_number() || !(v.get<double>() > 0))
        return invalid_file(source + ": \"" + key + "\" must hold positive numbers");
      out->push_back(v.get<float>());
    }
  }
  auto num = [](const nlohmann::json& o, const char* k) -> std::optional<double> {
    auto it = o.find(k);
    return it != o.end() && it->is_number() ? std::optional<double>(it->get<double>())
                                            : std::nullopt;
  };
  const double original = num(rp, "original_max_position_embeddings")
                              .value_or(num(j, "original_max_position_embeddings").value_or(0));
  const double max_pos = num(j, "max_position_embeddings").value_or(0);
  if (!(original > 0))
    return invalid_file(source + ": longrope needs original_max_position_embeddings");
  s.original_context = static_cast<int32_t>(original);
  const double factor = num(rp, "factor").value_or(max_pos > 0 ? max_pos / original : 1.0);
  s.factor = static_cast<float>(factor);
  s.attn_factor = static_cast<float>(
      num(rp, "attention_factor")
          .value_or(factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(factor) / std::log(original))));
  return Status::ok();
}

// YaRN from config.json as transformers reads it: factor (else max_position_embeddings /
// original), beta_fast / beta_slow (32 / 1), truncate (true), attention_factor (else
// 0.1·ln(factor) + 1, or DeepSeek's mscale(factor, mscale) / mscale(factor, mscale_all_dim)
// when both are set). mscale_all_dim also becomes yarn_log_mul (its softmax-scale correction,
// which only an architecture whose attention applies it may accept).
Status read_yarn(const nlohmann::json& j, const nlohmann::json& rp, const std::string& source,
                 ModelConfig& c) {
  auto num = [](const nlohmann::json& o, const char* k) -> std::optional<double> {
    auto it = o.find(k);
    return it != o.end() && it->is_number() ? std::optional<double>(it->get<double>())
                                            : std::nullopt;
  };
  RopeScaling& s = c.rope_scaling;
  s.type = RopeScalingType::kYarn;
  const double original = num(rp, "original_max_position_embeddings").value_or(0);
  if (!(original > 0))
    return invalid_file(source + ": yarn needs original_max_position_embeddings");
  s.original_context = static_cast<int32_t>(original);
  const double max_pos = num(j, "max_position_embeddings").value_or(0);
  s.factor = static_cast<float>(num(rp, "factor").value_or(max_pos / original));
  s.beta_fast = static_cast<float>(num(rp, "beta_fast").value_or(32.0));
  s.beta_slow = static_cast<float>(num(rp, "beta_slow").value_or(1.0));
  if (auto t = rp.find("truncate"); t != rp.end() && !t->is_null()) {
    if (!t->is_boolean()) return invalid_file(source + ": yarn \"truncate\" must be a boolean");
    s.yarn_truncate = t->get<bool>();
  }
  const double mscale = num(rp, "mscale").value_or(0),
               all_dim = num(rp, "mscale_all_dim").value_or(0);
  auto get_mscale = [&](double m) {
    return s.factor <= 1 ? 1.0 : 0.1 * m * std::log(s.factor) + 1.0;
  };
  const double derived = mscale != 0 && all_dim != 0 ? get_mscale(mscale) / get_mscale(all_dim)
                                                     : yarn_default_attn_factor(s.factor);
  // llama.cpp's converter takes "attn_factor" where "attention_factor" is absent.
  auto given = num(rp, "attention_factor");
  if (!given) given = num(rp, "attn_factor");
  s.attn_factor_given = given.has_value();
  s.attn_factor = static_cast<float>(given.value_or(derived));
  s.yarn_log_mul = static_cast<float>(0.1 * all_dim);
  return Status::ok();
}

Status check_dims(const ModelConfig& c, const std::string& source) {
  auto bad = [&](const char* what) {
    return invalid_file(source + ": invalid hyperparameter " + what);
  };
  if (c.n_embd <= 0) return bad("embedding length (must be > 0)");
  if (c.n_layer <= 0) return bad("block count (must be > 0)");
  if (c.n_head <= 0) return bad("head count (must be > 0)");
  if (c.n_head_kv <= 0 || c.n_head % c.n_head_kv != 0)
    return bad("KV head count (must be > 0 and divide the head count)");
  if (c.head_dim <= 0 || c.head_dim % 2 != 0 || c.head_dim > 1024)
    return bad("head dim (must be even, 2..1024)");
  if (c.n_ff <= 0) return bad("feed-forward length (must be > 0)");
  if (!(c.rms_eps > 0) || !(c.rope_theta > 0) || !std::isfinite(c.rms_eps) ||
      !std::isfinite(c.rope_theta))
    return bad("rms epsilon / rope theta (must be finite and > 0)");
  if (c.n_rot <= 0 || c.n_rot % 2 != 0 || c.n_rot > c.head_dim)
    return bad("rotary dimensions (must be even, 2..head dim)");
  if (c.rope_scaling.type != RopeScalingType::kNone && !(c.rope_scaling.factor > 0))
    return bad("rope scaling factor (must be > 0)");
  return Status::ok();
}

}  // namespace

Result<ModelConfig> config_from_gguf(const GgufFile& f) {
  auto arch_name = f.get_string(names::kGeneralArchitecture);
  if (!arch_name) return invalid_file("GGUF file has no general.architecture");
  const ArchSpec* arch = find_arch(*arch_name);
  if (!arch)
    return unsupported("unsupported architecture '" + *arch_name +
                       "' (supported: " + supported_arch_list() + ")");
  ModelConfig c;
  c.arch = std::string(arch->name);
  if (auto ft = f.get_int(names::kGeneralFileType); ft && *ft >= 0 && *ft <= INT32_MAX)
    c.file_type = static_cast<int32_t>(*ft);
  c.rope_style = arch->gguf_rope_style;
  auto key = [&](std::string_view suffix) { return arch_key(arch->name, suffix); };
  auto req_int = [&](std::string_view suffix, int32_t* out) -> Status {
    auto v = f.get_int(key(suffix));
    if (!v)
      return invalid_file("GGUF metadata key " + key(suffix) + " is missing or not an integer");
    if (*v < 0 || *v > (1ll << 31) - 1)
      return invalid_file("GGUF metadata key " + key(suffix) + " out of range");
    *out = static_cast<int32_t>(*v);
    return Status::ok();
  };
  // An optional key: absent → def; present, it must be an integer in [lo, hi] (a key that is
  // there but broken is an error, not a reason to fall back on the default).
  Status err = Status::ok();
  auto opt_int = [&](std::string_view full_key, int32_t def, int64_t lo = 1,
                     int64_t hi = INT32_MAX) -> int32_t {
    auto v = archs::gguf_int_in(f, full_key, def, lo, hi);
    if (!v.is_ok()) {
      if (err.is_ok()) err = v.status();
      return def;
    }
    return static_cast<int32_t>(*v);
  };
  auto opt_float = [&](std::string_view full_key, double def, double lo, double hi) -> double {
    auto v = archs::gguf_float_in(f, full_key, def, lo, hi);
    if (!v.is_ok()) {
      if (err.is_ok()) err = v.status();
      return def;
    }
    return *v;
  };
  LOOM_RETURN_IF_ERROR(req_int(names::kEmbeddingLength, &c.n_embd));
  LOOM_RETURN_IF_ERROR(req_int(names::kBlockCount, &c.n_layer));
  // Every block has tensors of its own: a count beyond the file's tensors (where it has any:
  // synth and plan read metadata alone) is a broken key, and would size per-layer tables.
  const int64_t n_tensors = static_cast<int64_t>(f.tensors().size());
  if (c.n_layer < 1 || c.n_layer > kMaxLayers || (n_tensors > 0 && c.n_layer > n_tensors))
    return invalid_file(
        "GGUF metadata key " + key(names::kBlockCount) + " = " + std::to_string(c.n_layer) +
        " must be in [1, " +
        std::to_string(n_tensors > 0 ? std::min<int64_t>(n_tensors, kMaxLayers) : kMaxLayers) +
        "]" +
        (n_tensors > 0 && n_tensors < kMaxLayers
             ? " (the file holds " + std::to_string(n_tensors) + " tensors)"
             : std::string()));
  // block_count counts the multi-token prediction layers too (after the main ones).
  c.n_mtp_layers = opt_int(key(names::kNextnPredictLayers), 0, 0, c.n_layer - 1);
  LOOM_RETURN_IF_ERROR(err);
  c.n_layer -= c.n_mtp_layers;
  LOOM_RETURN_IF_ERROR(req_int(names::kHeadCount, &c.n_head));
  LOOM_RETURN_IF_ERROR(req_int(names::kFeedForwardLength, &c.n_ff));
  c.n_head_kv = opt_int(key(names::kHeadCountKv), c.n_head);
  c.head_dim = opt_int(key(names::kKeyLength), c.n_head > 0 ? c.n_embd / c.n_head : 0);
  const int32_t v_len = opt_int(key(names::kValueLength), c.head_dim);
  c.n_rot = opt_int(key(names::kRopeDimensionCount), c.head_dim);
  // Absent: unknown (a run must then be given --max-model-len); present, it must be usable.
  c.context_length = opt_int(key(names::kContextLength), 0);
  c.n_vocab = opt_int(key(names::kVocabSize), 0);  // replaced by the embedding's row count
  c.rms_eps = static_cast<float>(opt_float(key(names::kRmsEps), c.rms_eps, 1e-30, 1));
  c.rope_theta = static_cast<float>(opt_float(key(names::kRopeFreqBase), c.rope_theta, 1e-3, 1e30));
  LOOM_RETURN_IF_ERROR(err);

  auto type = f.get_string(key(names::kRopeScalingType));
  auto factor = f.get_float(key(names::kRopeScalingFactor));
  if (type && *type == "llama3") {
    c.rope_scaling.type = RopeScalingType::kLlama3;
    c.rope_scaling.factor = static_cast<float>(factor.value_or(0));
    if (auto v = f.get_float(key(names::kRopeScalingLowFreqFactor)))
      c.rope_scaling.low_freq_factor = static_cast<float>(*v);
    if (auto v = f.get_float(key(names::kRopeScalingHighFreqFactor)))
      c.rope_scaling.high_freq_factor = static_cast<float>(*v);
    c.rope_scaling.original_context =
        opt_int(key(names::kRopeScalingOrigCtx), c.rope_scaling.original_context);
  } else if (type && *type == "yarn") {
    RopeScaling& y = c.rope_scaling;
    y.type = RopeScalingType::kYarn;
    y.factor = static_cast<float>(factor.value_or(0));
    y.original_context = opt_int(key(names::kRopeScalingOrigCtx), y.original_context);
    if (auto v = f.get_float(key(names::kRopeScalingYarnBetaFast)))
      y.beta_fast = static_cast<float>(*v);
    if (auto v = f.get_float(key(names::kRopeScalingYarnBetaSlow)))
      y.beta_slow = static_cast<float>(*v);
    // The file's attention factor (a config's attention_factor) replaces YaRN's own, as in
    // transformers. llama.cpp's context ignores the key for these architectures (it derives
    // 0.1·ln(factor) + 1 whatever the file says), so files that carry a different value run
    // as their checkpoint does here, and differently in llama.cpp.
    const auto given = f.get_float(key(names::kRopeScalingYarnAttnFactor));
    y.attn_factor_given = given.has_value();
    y.attn_factor = static_cast<float>(given.value_or(yarn_default_attn_factor(y.factor)));
  } else if ((type && *type == "linear") || (!type && factor && *factor != 1.0 && *factor != 0.0)) {
    c.rope_scaling.type = RopeScalingType::kLinear;
    c.rope_scaling.factor = static_cast<float>(factor.value_or(0));
  } else if (type && *type != "none") {
    return unsupported("rope scaling type '" + *type +
                       "' is not supported (llama3, linear, yarn, none)");
  }
  if (auto a = f.get_float(key(names::kRopeScalingAttnFactor));
      a && c.rope_scaling.type != RopeScalingType::kYarn) {
    c.rope_scaling.attn_factor = static_cast<float>(*a);
    c.rope_scaling.original_context =
        opt_int(key(names::kRopeScalingOrigCtx), c.rope_scaling.original_context);
  }
  // The tokenizer's keys: a broken one is the tokenizer's error to report (when something
  // loads it); the model runs on token ids without them.
  for (auto [k, out] :
       {std::pair{names::kTokenizerBos, &c.bos_token}, {names::kTokenizerEos, &c.eos_token}}) {
    auto v = f.get_int(k);
    *out = v && *v >= 0 && *v <= INT32_MAX ? static_cast<int32_t>(*v) : -1;
  }
  LOOM_RETURN_IF_ERROR(err);
  LOOM_RETURN_IF_ERROR(read_gguf_pooling(f, c));
  LOOM_RETURN_IF_ERROR(check_dims(c, "GGUF file"));
  c.layers.assign(c.n_layer, LayerSpec{});
  if (arch->read_gguf) LOOM_RETURN_IF_ERROR(arch->read_gguf(f, c));
  // Multi-head Latent Attention sizes its heads itself (its value_length is the latent's).
  if (v_len != c.head_dim && c.mla.kv_lora_rank == 0)
    return unsupported("value length differs from key length in " + key(names::kValueLength));
  return c;
}

namespace {

// A vision-language checkpoint (Qwen3.5's `qwen3_5` / `qwen3_5_moe`, and others laid out the
// same way) keeps its language model's config in `text_config`, with a few fields such as
// tie_word_embeddings only at the top. When loom knows the inner model_type, that config
// (with those fields filled in from the top) is the model's: loom serves the text model, and
// the vision tower's tensors are never read. Text-only positions make Qwen3.5's multimodal
// RoPE (mrope_section) the plain RoPE, so nothing else changes.
void unwrap_text_config(nlohmann::json& j) {
  auto inner = j.find("text_config");
  if (inner == j.end() || !inner->is_object() || !inner->contains("model_type") ||
      !(*inner)["model_type"].is_string() ||
      !find_arch_hf((*inner)["model_type"].get<std::string>()))
    return;
  nlohmann::json text = *inner;
  for (const char* k : {"tie_word_embeddings", "bos_token_id", "eos_token_id", "pad_token_id"})
    if (j.contains(k) && !text.contains(k)) text[k] = j[k];
  j = std::move(text);
}

}  // namespace

Result<ModelConfig> config_from_hf_json(std::string_view text, const std::string& source) {
  // Copying and printing a value recurse once per level; no config nests more than a few.
  if (json_nesting_exceeds(text))
    return invalid_file(source + ": nests arrays and objects deeper than " +
                        std::to_string(kMaxJsonDepth) + " levels");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // "[json.exception.parse_error.101] parse error at line 3, column 1: ...": the position
    // and the reason, without the library's tag.
    std::string why = e.what();
    if (const size_t tag_end = why.find("] "); why.starts_with("[") && tag_end != std::string::npos)
      why.erase(0, tag_end + 2);
    return invalid_file(source + ": not valid JSON (" + why + ")");
  }
  if (!j.is_object()) return invalid_file(source + ": not a JSON object");
  // A key of the wrong JSON type is an error naming it; json::value() would throw.
  auto type_error = [&](const char* k, const nlohmann::json& v, const char* want) {
    std::string got = v.dump();
    if (got.size() > 60) got = got.substr(0, 60) + "...";
    return invalid_file(source + ": \"" + k + "\" must be " + want + ", got " + got);
  };
  auto model_type = [&](const nlohmann::json& o) -> Result<std::string> {
    auto it = o.find("model_type");
    if (it == o.end() || it->is_null()) return std::string();
    if (!it->is_string()) return type_error("model_type", *it, "a string");
    return it->get<std::string>();
  };
  LOOM_ASSIGN_OR_RETURN(const std::string outer_type, model_type(j));
  if (!find_arch_hf(outer_type)) unwrap_text_config(j);
  LOOM_ASSIGN_OR_RETURN(const std::string type, model_type(j));
  const ArchSpec* arch = find_arch_hf(type);
  if (!arch)
    return unsupported(source + ": unsupported model_type '" + type +
                       "' (supported: " + supported_arch_list() + ", mistral)");
  ModelConfig c;
  c.arch = std::string(arch->name);
  c.rope_style = RopeStyle::kNeox;
  Status err = Status::ok();
  // Integer field; null or absent → def (or an error when def < 0).
  auto get_int = [&](const char* k, int64_t def) -> int32_t {
    auto it = j.find(k);
    if (it == j.end() || it->is_null()) {
      if (def < 0 && err.is_ok()) err = invalid_file(source + ": missing \"" + k + "\"");
      return static_cast<int32_t>(def);
    }
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > INT32_MAX) {
      if (err.is_ok())
        err = invalid_file(source + ": \"" + k + "\" must be a non-negative integer");
      return 0;
    }
    return static_cast<int32_t>(it->get<int64_t>());
  };
  auto get_float = [&](const nlohmann::json& obj, const char* k, double def) -> double {
    auto it = obj.find(k);
    if (it == obj.end() || it->is_null()) return def;
    if (!it->is_number()) {
      if (err.is_ok()) err = invalid_file(source + ": \"" + k + "\" must be a number");
      return def;
    }
    return it->get<double>();
  };
  auto get_bool = [&](const char* k, bool def) -> bool {
    auto it = j.find(k);
    if (it == j.end() || it->is_null()) return def;
    if (!it->is_boolean()) {
      if (err.is_ok()) err = type_error(k, *it, "a boolean");
      return def;
    }
    return it->get<bool>();
  };
  auto get_string = [&](const nlohmann::json& obj, const char* k, std::string def) {
    auto it = obj.find(k);
    if (it == obj.end() || it->is_null()) return def;
    if (!it->is_string()) {
      if (err.is_ok()) err = type_error(k, *it, "a string");
      return def;
    }
    return it->get<std::string>();
  };
  // bos/eos may be null, an integer or a list of integers (the first is the primary one).
  auto token_id = [&](const char* k) -> int32_t {
    auto it = j.find(k);
    if (it == j.end()) return -1;
    const nlohmann::json* id = it->is_array() && !it->empty() ? &(*it)[0] : &*it;
    if (!id->is_number_integer()) return -1;
    if (id->get<int64_t>() < -1 || id->get<int64_t>() > INT32_MAX) {
      if (err.is_ok()) err = type_error(k, *it, "a token id");
      return -1;
    }
    return static_cast<int32_t>(id->get<int64_t>());
  };

  c.n_vocab = get_int("vocab_size", -1);
  c.n_embd = get_int("hidden_size", -1);
  c.n_layer = get_int("num_hidden_layers", -1);
  // Per-layer tables are sized by it before any tensor is seen (the checkpoint's tensors are
  // checked against it later): far beyond any real model is a broken file.
  if (err.is_ok() && c.n_layer > kMaxLayers)
    err = invalid_file(source + ": \"num_hidden_layers\" " + std::to_string(c.n_layer) +
                       " is over " + std::to_string(kMaxLayers));
  c.n_head = get_int("num_attention_heads", -1);
  c.n_head_kv = get_int("num_key_value_heads", c.n_head);
  c.head_dim = get_int("head_dim", c.n_head > 0 ? c.n_embd / c.n_head : 0);
  c.n_ff = get_int("intermediate_size", -1);
  // Multi-token prediction modules: DeepSeek-V3's and Qwen3-Next's num_nextn_predict_layers,
  // Qwen3.5's mtp_num_hidden_layers.
  const char* mtp_key =
      j.contains("num_nextn_predict_layers") ? "num_nextn_predict_layers" : "mtp_num_hidden_layers";
  c.n_mtp_layers = get_int(mtp_key, 0);
  if (c.n_mtp_layers < 0 || c.n_mtp_layers > 16)
    return invalid_file(source + ": " + mtp_key + " must be in [0, 16]");
  // Absent or null: unknown (a run must then be given --max-model-len); 0 says nothing usable.
  c.context_length = get_int("max_position_embeddings", 0);
  if (err.is_ok() && j.contains("max_position_embeddings") &&
      !j["max_position_embeddings"].is_null() && c.context_length == 0)
    err = invalid_file(source + ": \"max_position_embeddings\" must be > 0");
  c.rms_eps = static_cast<float>(get_float(j, "rms_norm_eps", 1e-6));
  if (err.is_ok() && !(c.rms_eps > 0 && c.rms_eps <= 1))
    err = invalid_file(source + ": \"rms_norm_eps\" must be in (0, 1], got " +
                       j["rms_norm_eps"].dump());
  c.tied_embeddings = get_bool("tie_word_embeddings", false);
  c.bos_token = token_id("bos_token_id");
  c.eos_token = token_id("eos_token_id");
  LOOM_RETURN_IF_ERROR(err);
  // Gemma names it hidden_activation; everyone else hidden_act.
  auto act_it = j.find("hidden_activation");
  if (act_it == j.end() || act_it->is_null()) act_it = j.find("hidden_act");
  if (act_it != j.end() && !act_it->is_null() && !act_it->is_string())
    return type_error(act_it.key().c_str(), *act_it, "a string");
  const std::string act =
      act_it != j.end() && act_it->is_string() ? act_it->get<std::string>() : std::string("silu");
  if (act == "silu" || act == "swish")
    c.activation = Activation::kSilu;
  else if (act == "gelu_pytorch_tanh" || act == "gelu_tanh")
    c.activation = Activation::kGeluTanh;
  else
    return unsupported(source + ": activation '" + act +
                       "' is not supported (silu, gelu_pytorch_tanh)");
  for (const char* k : {"mlp_bias", "attention_bias"}) {
    const bool bias = get_bool(k, false);
    LOOM_RETURN_IF_ERROR(err);
    if (bias && arch->qkv_bias != TensorNeed::kRequired)
      return unsupported(source + ": \"" + k + "\": true is not supported");
  }
  double rotary = get_float(j, "partial_rotary_factor", 1.0);

  // RoPE: transformers >= 5 writes rope_parameters {rope_theta, rope_type, ...}; older
  // configs have a top-level rope_theta and an optional rope_scaling {type|rope_type, ...}.
  c.rope_theta = static_cast<float>(get_float(j, "rope_theta", 10000.0));
  const nlohmann::json* rp = nullptr;
  for (const char* k : {"rope_parameters", "rope_scaling"}) {
    auto it = j.find(k);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_object()) return type_error(k, *it, "an object");
    if (!rp) rp = &*it;
  }
  // Per layer type (Gemma 3): the global layers' parameters are the model's; the
  // architecture's reader sets the local layers'.
  if (rp)
    if (auto full = rp->find("full_attention"); full != rp->end() && full->is_object()) rp = &*full;
  if (rp) {
    rotary = get_float(*rp, "partial_rotary_factor", rotary);
    if (auto ms = rp->find("mrope_section"); ms != rp->end() && !ms->is_null()) {
      // llama.cpp's converter writes up to four sections (padded with zeros).
      const bool ok =
          ms->is_array() && ms->size() <= 4 &&
          std::all_of(ms->begin(), ms->end(), [](const nlohmann::json& v) {
            return v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= 65536;
          });
      if (!ok) return type_error("mrope_section", *ms, "a list of up to 4 section sizes");
      for (const auto& v : *ms) c.rope_sections.push_back(v.get<int32_t>());
    }
    c.rope_theta = static_cast<float>(get_float(*rp, "rope_theta", c.rope_theta));
    std::string rt = get_string(*rp, "rope_type", get_string(*rp, "type", "default"));
    LOOM_RETURN_IF_ERROR(err);
    if (rt == "llama3") {
      c.rope_scaling.type = RopeScalingType::kLlama3;
      c.rope_scaling.factor = static_cast<float>(get_float(*rp, "factor", 0));
      c.rope_scaling.low_freq_factor = static_cast<float>(get_float(*rp, "low_freq_factor", 1.0));
      c.rope_scaling.high_freq_factor = static_cast<float>(get_float(*rp, "high_freq_factor", 4.0));
      c.rope_scaling.original_context = static_cast<int32_t>(
          get_float(*rp, "original_max_position_embeddings", c.rope_scaling.original_context));
    } else if (rt == "linear") {
      c.rope_scaling.type = RopeScalingType::kLinear;
      c.rope_scaling.factor = static_cast<float>(get_float(*rp, "factor", 0));
    } else if (rt == "longrope" || rt == "su") {
      LOOM_RETURN_IF_ERROR(read_longrope(j, *rp, source, c));
    } else if (rt == "yarn") {
      LOOM_RETURN_IF_ERROR(read_yarn(j, *rp, source, c));
    } else if (rt != "default") {
      return unsupported(source + ": rope_type '" + rt +
                         "' is not supported (default, linear, llama3, longrope, yarn)");
    }
  }
  LOOM_RETURN_IF_ERROR(err);
  if (!(rotary > 0 && rotary <= 1))
    return invalid_file(source + ": partial_rotary_factor must be in (0, 1]");
  c.n_rot = static_cast<int32_t>(c.head_dim * rotary);
  LOOM_RETURN_IF_ERROR(check_dims(c, source));
  if (c.rope_scaling.type == RopeScalingType::kLongRope &&
      (c.rope_scaling.short_factor.size() != static_cast<size_t>(c.n_rot / 2) ||
       c.rope_scaling.long_factor.size() != static_cast<size_t>(c.n_rot / 2)))
    return invalid_file(source + ": longrope factor lists must hold " +
                        std::to_string(c.n_rot / 2) + " values (rotated dimensions / 2)");
  if (c.n_vocab <= 0) return invalid_file(source + ": vocab_size must be > 0");
  c.layers.assign(c.n_layer, LayerSpec{});
  if (arch->read_hf) LOOM_RETURN_IF_ERROR(arch->read_hf(j, c));
  if (c.rope_scaling.yarn_log_mul != 0 && c.mla.kv_lora_rank == 0)
    return unsupported(source + ": yarn with \"mscale_all_dim\" is not supported for " + c.arch);
  for (const char* k : {"attn_logit_softcapping", "final_logit_softcapping"})
    if (j.contains(k) && !j[k].is_null() && c.attn_softcap == 0 && c.final_softcap == 0)
      return unsupported(source + ": \"" + std::string(k) + "\" is not supported for " + c.arch);
  return c;
}

namespace {

// The multi-token prediction modules a sharded checkpoint's index names under the
// architecture's prefix ("mtp.layers.{i}."): one more than the largest i, 0 when none.
int32_t indexed_mtp_modules(const std::string& dir, const ArchSpec& arch) {
  std::ifstream in(dir + "/model.safetensors.index.json");
  if (!in || arch.hf_mtp_prefix.empty()) return 0;
  const nlohmann::json index = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  auto map = index.is_object() ? index.find("weight_map") : index.end();
  if (map == index.end() || !map->is_object()) return 0;
  const std::string prefix = std::string(arch.hf_mtp_prefix) + "layers.";
  int32_t n = 0;
  for (const auto& [name, file] : map->items()) {
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const size_t dot = name.find('.', prefix.size());
    const std::string digits = name.substr(prefix.size(), dot - prefix.size());
    if (digits.empty() || digits.size() > 2 ||
        !std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
      continue;
    n = std::max(n, std::stoi(digits) + 1);
  }
  return n;
}

}  // namespace

Result<ModelConfig> config_from_hf_dir(const std::string& dir) {
  std::string path = dir + "/config.json";
  std::ifstream in(path);
  if (!in) return not_found("cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  LOOM_ASSIGN_OR_RETURN(ModelConfig c, config_from_hf_json(text, path));
  // Qwen3-Next's published config.json does not count its MTP module (vLLM assumes one;
  // llama.cpp's converter counts the mtp.* tensors): count them in the index and read the
  // config again with that count, where the config says nothing.
  const ArchSpec* arch = find_arch(c.arch);
  if (c.n_mtp_layers == 0 && arch) {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    auto silent = [](const nlohmann::json& o) {
      return o.is_object() && !o.contains("num_nextn_predict_layers") &&
             !o.contains("mtp_num_hidden_layers");
    };
    auto inner = j.find("text_config");
    const bool wrapped = inner != j.end() && inner->is_object();
    if (const int32_t n = indexed_mtp_modules(dir, *arch);
        n > 0 && silent(j) && (!wrapped || silent(*inner))) {
      j["num_nextn_predict_layers"] = n;
      if (wrapped) (*inner)["num_nextn_predict_layers"] = n;
      text = j.dump();
      LOOM_ASSIGN_OR_RETURN(c, config_from_hf_json(text, path));
    }
  }
  LOOM_RETURN_IF_ERROR(read_hf_pooling(dir, text, c));
  return c;
}

std::vector<float> rope_inv_freq(const ModelConfig& c, std::span<const float> freq_factors,
                                 const LayerSpec& layer) {
  const int n_rot = c.n_rot > 0 ? c.n_rot : c.head_dim;
  const int half = n_rot / 2;
  std::vector<float> out(half);
  const RopeScaling none;
  const auto& s = layer.rope_scaled ? c.rope_scaling : none;
  if (!layer.rope_scaled) freq_factors = {};
  const double theta = layer.rope_theta > 0 ? layer.rope_theta : c.rope_theta;
  // YaRN's blend: pair i is extrapolated (kept) below dimension `low`, interpolated (divided
  // by factor) above `high`, linearly mixed between; the bounds are where a pair turns
  // beta_fast / beta_slow times over the original context (transformers' find_correction_dim).
  double yarn_low = 0, yarn_high = 0;
  if (s.type == RopeScalingType::kYarn && freq_factors.empty()) {
    auto dim_of = [&](double rotations) {
      return n_rot * std::log(s.original_context / (rotations * 2 * M_PI)) / (2 * std::log(theta));
    };
    yarn_low = dim_of(s.beta_fast);
    yarn_high = dim_of(s.beta_slow);
    if (s.yarn_truncate) {
      yarn_low = std::floor(yarn_low);
      yarn_high = std::ceil(yarn_high);
    }
    yarn_low = std::max(yarn_low, 0.0);
    yarn_high = std::min(yarn_high, n_rot - 1.0);
    if (yarn_low == yarn_high) yarn_high += 0.001;
  }
  for (int i = 0; i < half; ++i) {
    double f = 1.0 / std::pow(theta, 2.0 * i / n_rot);
    if (!freq_factors.empty()) {
      f /= freq_factors[i];
    } else if (s.type == RopeScalingType::kLinear) {
      f /= s.factor;
    } else if (s.type == RopeScalingType::kYarn) {
      const double ramp = std::clamp((i - yarn_low) / (yarn_high - yarn_low), 0.0, 1.0);
      f = f / s.factor * ramp + f * (1.0 - ramp);
    } else if (s.type == RopeScalingType::kLlama3) {
      const double low_wavelen = s.original_context / s.low_freq_factor;
      const double high_wavelen = s.original_context / s.high_freq_factor;
      const double wavelen = 2.0 * M_PI / f;
      if (wavelen > low_wavelen) {
        f /= s.factor;
      } else if (wavelen >= high_wavelen) {  // between the two: blend
        double smooth = (s.original_context / wavelen - s.low_freq_factor) /
                        (s.high_freq_factor - s.low_freq_factor);
        f = (1.0 - smooth) * f / s.factor + smooth * f;
      }
    }
    out[i] = static_cast<float>(f);
  }
  return out;
}

}  // namespace loom
