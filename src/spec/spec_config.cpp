#include "spec/spec_config.h"

#include <algorithm>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <vector>

namespace loom::spec {
namespace {

// vLLM's MTPModelTypes (vllm/config/speculative.py): per-architecture names it replaces with
// "mtp" (warning that they are deprecated). Which layers propose is the model's, not the name's.
constexpr std::string_view kMtpAliases[] = {
    "deepseek_mtp",        "dots3_note_mtp",     "mimo_mtp",
    "mimo_v2_mtp",         "glm4_moe_mtp",       "glm4_moe_lite_mtp",
    "glm_ocr_mtp",         "ernie_mtp",          "nemotron_h_mtp",
    "exaone_moe_mtp",      "exaone4_5_mtp",      "qwen3_next_mtp",
    "qwen3_5_mtp",         "longcat_flash_mtp",  "bailing_hybrid_v3_mtp",
    "minimax_m3_mtp",      "bailing_hybrid_mtp", "kimi_k3_mtp",
    "pangu_ultra_moe_mtp", "step3p5_mtp",        "hy_v3_mtp",
    "hy_v4_mtp",           "gemma4_mtp",         "inkling_mtp",
    "glm5_next_mtp"};

Result<int32_t> int_field(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = j.at(key);
  if (!v.is_number_integer())
    return invalid_argument(std::string("--speculative-config: \"") + key +
                            "\" must be an integer, got " + v.dump());
  const int64_t x = v.get<int64_t>();
  if (x < 0 || x > 1 << 20)
    return invalid_argument(std::string("--speculative-config: \"") + key +
                            "\" is out of range: " + std::to_string(x));
  return static_cast<int32_t>(x);
}

// The JSON object, or an error. nlohmann keeps the last of a repeated key; a user who wrote
// two values meant one of them, so which one is not for the parser to guess.
Result<nlohmann::json> parse_object(std::string_view text) {
  std::vector<std::set<std::string>> keys;  // of each object being parsed
  std::string repeated;
  auto on_event = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) {
      keys.emplace_back();
    } else if (event == Event::object_end && !keys.empty()) {
      keys.pop_back();
    } else if (event == Event::key && !keys.empty() && parsed.is_string() &&
               !keys.back().insert(parsed.get<std::string>()).second && repeated.empty()) {
      repeated = parsed.get<std::string>();
    }
    return true;
  };
  nlohmann::json j = nlohmann::json::parse(text, on_event, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return invalid_argument(
        "--speculative-config must be a JSON object, e.g. "
        "'{\"method\": \"ngram\", \"num_speculative_tokens\": 4}'");
  if (!repeated.empty())
    return invalid_argument("--speculative-config: \"" + repeated + "\" is given twice");
  return j;
}

}  // namespace

Result<SpeculativeConfig> parse_speculative_config(std::string_view text) {
  LOOM_ASSIGN_OR_RETURN(const nlohmann::json j, parse_object(text));
  SpeculativeConfig c;
  // 0 is SpeculativeConfig's "unset" for these; what the user wrote is told apart by presence.
  const char* lookup_key = nullptr;  // the first prompt_lookup_* key given
  bool has_k = false;
  for (const auto& [key, value] : j.items()) {
    if (key == "method") {
      if (!value.is_string())
        return invalid_argument("--speculative-config: \"method\" must be a string");
      const std::string m = value.get<std::string>();
      if (m == "ngram")
        c.method = SpeculativeConfig::Method::kNgram;
      else if (m == "draft_model")
        c.method = SpeculativeConfig::Method::kDraftModel;
      else if (m == "mtp" || std::find(std::begin(kMtpAliases), std::end(kMtpAliases), m) !=
                                 std::end(kMtpAliases))
        c.method = SpeculativeConfig::Method::kMtp;
      else
        return invalid_argument("--speculative-config: method \"" + m +
                                "\" is not supported; loom speculates with \"ngram\", a "
                                "draft model (\"draft_model\", or just \"model\") or the "
                                "model's own MTP layers (\"mtp\")");
    } else if (key == "model") {
      if (!value.is_string() || value.get<std::string>().empty())
        return invalid_argument("--speculative-config: \"model\" must be a model path");
      c.model = value.get<std::string>();
    } else if (key == "num_speculative_tokens") {
      LOOM_ASSIGN_OR_RETURN(c.num_speculative_tokens, int_field(j, "num_speculative_tokens"));
      if (c.num_speculative_tokens < 1 || c.num_speculative_tokens > kMaxSpeculativeTokens)
        return invalid_argument("--speculative-config: \"num_speculative_tokens\" must be in [1, " +
                                std::to_string(kMaxSpeculativeTokens) + "], got " +
                                std::to_string(c.num_speculative_tokens));
      has_k = true;
    } else if (key == "prompt_lookup_min" || key == "prompt_lookup_max") {
      const bool min = key == "prompt_lookup_min";
      const char* name = min ? "prompt_lookup_min" : "prompt_lookup_max";
      LOOM_ASSIGN_OR_RETURN(const int32_t n, int_field(j, name));
      if (n < 1)  // vLLM: "must be > 0"; 0 is not "unset" when written
        return invalid_argument(std::string("--speculative-config: \"") + name +
                                "\" must be at least 1, got " + std::to_string(n));
      (min ? c.prompt_lookup_min : c.prompt_lookup_max) = n;
      if (!lookup_key) lookup_key = name;
    } else if (key == "disable_by_batch_size") {
      LOOM_ASSIGN_OR_RETURN(c.disable_by_batch_size, int_field(j, "disable_by_batch_size"));
      if (c.disable_by_batch_size < 2)  // vLLM's bound; 0 stays the engine's "unset"
        return invalid_argument(
            "--speculative-config: \"disable_by_batch_size\" must be > 1 (no proposals in a "
            "step with that many decoding sequences), got " +
            std::to_string(c.disable_by_batch_size));
    } else {
      return invalid_argument("--speculative-config: unknown key \"" + key +
                              "\" (known: method, model, num_speculative_tokens, "
                              "prompt_lookup_min, prompt_lookup_max, disable_by_batch_size)");
    }
  }
  // vLLM: a "model" without a method is a draft model.
  if (c.method == SpeculativeConfig::Method::kNone && !c.model.empty())
    c.method = SpeculativeConfig::Method::kDraftModel;
  if (c.method == SpeculativeConfig::Method::kNone)
    return invalid_argument(
        "--speculative-config: \"method\" (\"ngram\", \"mtp\") or \"model\" (a draft model) is "
        "required");
  if (lookup_key && c.method != SpeculativeConfig::Method::kNgram)
    return invalid_argument(std::string("--speculative-config: \"") + lookup_key +
                            "\" is only for method \"ngram\"");
  // vLLM requires it too (no draft config to read), except for MTP: the model's MTP layers.
  if (!has_k && c.method != SpeculativeConfig::Method::kMtp)
    return invalid_argument(
        "--speculative-config: \"num_speculative_tokens\" (tokens proposed per step, 1 to " +
        std::to_string(kMaxSpeculativeTokens) + ") is required");
  if (Status s = finalize_speculative_config(c); !s.is_ok())
    return Status(s.code(), "--speculative-config: " + s.message());
  return c;
}

Status finalize_speculative_config(SpeculativeConfig& c, int32_t n_mtp_layers) {
  using Method = SpeculativeConfig::Method;
  if (c.method == Method::kNone) return Status::ok();
  const bool draft = c.method == Method::kDraftModel;
  if (draft && c.model.empty())
    return invalid_argument("a draft-model speculative config needs \"model\"");
  if (!draft && !c.model.empty())
    return invalid_argument(std::string("\"model\" is only for a draft model, not for method ") +
                            (c.method == Method::kMtp ? "mtp" : "ngram"));
  // vLLM's MTP default: one proposal per MTP layer (n_predict). Until the model is known (the
  // command line), or when it has none (refused by the MTP proposer, naming the model), unset.
  if (c.method == Method::kMtp && c.num_speculative_tokens == 0)
    c.num_speculative_tokens = n_mtp_layers;
  const bool k_unset = c.method == Method::kMtp && c.num_speculative_tokens == 0;
  if (!k_unset &&
      (c.num_speculative_tokens < 1 || c.num_speculative_tokens > kMaxSpeculativeTokens))
    return invalid_argument("num_speculative_tokens must be in [1, " +
                            std::to_string(kMaxSpeculativeTokens) + "], got " +
                            std::to_string(c.num_speculative_tokens));
  if (c.disable_by_batch_size < 0)
    return invalid_argument("disable_by_batch_size must not be negative, got " +
                            std::to_string(c.disable_by_batch_size));
  if (!k_unset && c.draft_min > c.num_speculative_tokens)
    return invalid_argument("--draft-min " + std::to_string(c.draft_min) +
                            " is over the tokens proposed per step (" +
                            std::to_string(c.num_speculative_tokens) + ")");
  if (!(c.draft_p_min >= 0.0f && c.draft_p_min <= 1.0f))
    return invalid_argument("--spec-draft-p-min must be in [0, 1], got " +
                            std::to_string(c.draft_p_min));
  if (c.method != Method::kNgram) return Status::ok();
  if (c.draft_p_min > 0.0f)
    return invalid_argument(
        "--spec-draft-p-min is for a draft model's or MTP's proposals: n-gram lookup's have no "
        "probabilities");
  // An error names the values given, not the defaults filled in for the other.
  for (const auto& [name, v] : {std::pair{"prompt_lookup_min", c.prompt_lookup_min},
                                std::pair{"prompt_lookup_max", c.prompt_lookup_max}})
    if (v < 0 || v > kMaxLookup)
      return invalid_argument(std::string(name) + " must be in [1, " + std::to_string(kMaxLookup) +
                              "], got " + std::to_string(v));
  if (c.prompt_lookup_min > 0 && c.prompt_lookup_max > 0 &&
      c.prompt_lookup_min > c.prompt_lookup_max)
    return invalid_argument("prompt_lookup_min (" + std::to_string(c.prompt_lookup_min) +
                            ") must not be over prompt_lookup_max (" +
                            std::to_string(c.prompt_lookup_max) + ")");
  if (c.prompt_lookup_min == 0 && c.prompt_lookup_max == 0)
    c.prompt_lookup_min = c.prompt_lookup_max = 5;
  else if (c.prompt_lookup_min == 0)
    c.prompt_lookup_min = c.prompt_lookup_max;
  else if (c.prompt_lookup_max == 0)
    c.prompt_lookup_max = c.prompt_lookup_min;
  if (c.prompt_lookup_min < 1 || c.prompt_lookup_max > kMaxLookup ||
      c.prompt_lookup_min > c.prompt_lookup_max)
    return invalid_argument(
        "prompt_lookup_min and prompt_lookup_max must satisfy 1 <= min <= "
        "max <= " +
        std::to_string(kMaxLookup) + ", got " + std::to_string(c.prompt_lookup_min) + " and " +
        std::to_string(c.prompt_lookup_max));
  return Status::ok();
}

}  // namespace loom::spec
