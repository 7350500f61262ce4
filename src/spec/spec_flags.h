// The speculative-decoding flags every command that runs the engine takes (serve, run, bench
// model, bench offline): vLLM's --speculative-config JSON and llama-server's --draft-max /
// --draft-min / --model-draft, and their newer --spec-draft-* / --spec-type spellings. Header-only
// over CLI11, so that the spec module itself does not link the command-line library.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "spec/spec_config.h"

namespace loom::spec {

struct SpeculativeFlags {
  std::string config_json;
  std::string model_draft;
  int32_t draft_max = -1;
  int32_t draft_min = -1;
  float draft_p_min = -1.0f;
  std::string spec_type;
  int32_t ngram_size_n = -1, ngram_size_m = -1, ngram_min_hits = -1;

  void add_to(CLI::App& app) {
    config_option_ =
        app.add_option("--speculative-config", config_json,
                       "speculative decoding, vLLM's JSON: '{\"method\": \"ngram\", "
                       "\"num_speculative_tokens\": 4, \"prompt_lookup_max\": 4, "
                       "\"prompt_lookup_min\": 2}', a draft model ('{\"model\": PATH, ...}') or "
                       "the model's own MTP layers ('{\"method\": \"mtp\", "
                       "\"num_speculative_tokens\": 2}'; its default: one per MTP layer) "
                       "(optional \"disable_by_batch_size\")");
    // llama-server's spellings, old and new (--spec-draft-*: llama.cpp since 2026).
    app.add_option("--draft-max,--draft,--draft-n,--spec-draft-n-max", draft_max,
                   "tokens proposed per step (llama-server's name; alone it enables n-gram "
                   "lookup)")
        ->check(CLI::Range(1, 1 << 20));
    app.add_option("--draft-min,--draft-n-min,--spec-draft-n-min", draft_min,
                   "proposals shorter than this are not verified")
        ->check(CLI::Range(0, 1 << 20));
    app.add_option("--spec-draft-p-min,--draft-p-min", draft_p_min,
                   "a draft model's or MTP's proposals of a step end where its probability of "
                   "its best token (softmax over its 10 best) is below P (default 0: never)")
        ->check(CLI::Range(0.0f, 1.0f));
    model_draft_option_ =
        app.add_option("--model-draft,--spec-draft-model", model_draft,
                       "draft model with the target's vocabulary (GGUF, HF directory or "
                       "synth:PRESET); proposes --draft-max tokens per step (default 4)");
    app.add_option("--spec-type", spec_type,
                   "llama-server's proposer: draft-simple (needs --spec-draft-model), draft-mtp "
                   "(the model's MTP layers), ngram-simple, or none");
    app.add_option("--spec-ngram-simple-size-n", ngram_size_n,
                   "ngram-simple: tokens the lookup matches (default 12)")
        ->check(CLI::Range(1, 1024));
    app.add_option("--spec-ngram-simple-size-m", ngram_size_m,
                   "ngram-simple: tokens proposed after a match (default 48)")
        ->check(CLI::Range(1, 1024));
    app.add_option("--spec-ngram-simple-min-hits", ngram_min_hits,
                   "ngram-simple: matches needed before proposing; loom proposes after the "
                   "first (1)")
        ->check(CLI::Range(1, 1 << 20));
  }

  // Fills `c` from the flags given; an error names the flag.
  Status apply(SpeculativeConfig& c) const {
    // An option given with an empty value (a shell variable that was not set) must not quietly
    // run without speculation.
    if (config_option_ && config_option_->count() > 0 && config_json.empty())
      return invalid_argument(
          "--speculative-config: the value is empty; give vLLM's JSON object, e.g. "
          "'{\"method\": \"ngram\", \"num_speculative_tokens\": 4}'");
    if (model_draft_option_ && model_draft_option_->count() > 0 && model_draft.empty())
      return invalid_argument(
          "--model-draft: the value is empty; give a draft model (GGUF, HF directory or "
          "synth:PRESET)");
    if (draft_max > kMaxSpeculativeTokens)
      return invalid_argument("--draft-max " + std::to_string(draft_max) +
                              ": tokens proposed per step must be in [1, " +
                              std::to_string(kMaxSpeculativeTokens) + "]");
    if (!spec_type.empty()) {
      LOOM_RETURN_IF_ERROR(apply_spec_type(c));
    } else if (ngram_size_n > 0 || ngram_size_m > 0 || ngram_min_hits > 0) {
      return invalid_argument("--spec-ngram-simple-*: these need --spec-type ngram-simple");
    } else if (!config_json.empty()) {
      if (!model_draft.empty())
        return invalid_argument("--model-draft and --speculative-config: give one of them");
      LOOM_ASSIGN_OR_RETURN(c, parse_speculative_config(config_json));
      // Unset only for "mtp" (the model's MTP layers), which --draft-max may then set.
      if (draft_max > 0 && c.num_speculative_tokens > 0 && draft_max != c.num_speculative_tokens)
        return invalid_argument("--draft-max " + std::to_string(draft_max) +
                                " and --speculative-config's \"num_speculative_tokens\": " +
                                std::to_string(c.num_speculative_tokens) +
                                " differ; give one of them");
    } else if (!model_draft.empty()) {
      c.method = SpeculativeConfig::Method::kDraftModel;
      c.model = model_draft;
      c.num_speculative_tokens = 4;
    } else if (draft_max > 0) {
      c.method = SpeculativeConfig::Method::kNgram;
    } else if (draft_min >= 0) {
      return invalid_argument(
          "--draft-min needs --draft-max, --model-draft or --speculative-config");
    }
    if (draft_p_min > 0.0f && c.method == SpeculativeConfig::Method::kNone)
      return invalid_argument(
          "--spec-draft-p-min needs a draft model (--spec-draft-model) or MTP "
          "(--spec-type draft-mtp)");
    if (draft_max > 0) c.num_speculative_tokens = draft_max;
    if (draft_min >= 0) c.draft_min = draft_min;
    if (draft_p_min >= 0.0f) c.draft_p_min = draft_p_min;
    return finalize_speculative_config(c);
  }

 private:
  // llama-server's --spec-type: one of the proposers loom has (llama.cpp can chain several).
  Status apply_spec_type(SpeculativeConfig& c) const {
    using Method = SpeculativeConfig::Method;
    if (!config_json.empty())
      return invalid_argument("--spec-type and --speculative-config: give one of them");
    std::string type;
    for (size_t begin = 0; begin <= spec_type.size();) {
      size_t end = spec_type.find(',', begin);
      if (end == std::string::npos) end = spec_type.size();
      std::string name = spec_type.substr(begin, end - begin);
      begin = end + 1;
      name.erase(0, name.find_first_not_of(' '));
      name.erase(name.find_last_not_of(' ') + 1);
      if (name == "none") continue;
      if (name != "draft-simple" && name != "draft-mtp" && name != "ngram-simple") {
        const bool llama_cpp = name == "draft-eagle3" || name == "draft-dflash" ||
                               name == "draft-dspark" || name == "ngram-map-k" ||
                               name == "ngram-map-k4v" || name == "ngram-mod" ||
                               name == "ngram-cache";
        return invalid_argument("--spec-type " + name + ": " +
                                (llama_cpp ? "llama.cpp's proposer of that name is not in loom"
                                           : std::string("unknown type")) +
                                "; loom has draft-simple, draft-mtp, ngram-simple and none");
      }
      if (!type.empty() && type != name)
        return invalid_argument("--spec-type " + spec_type +
                                ": loom runs one proposer at a time; give one type");
      type = name;
    }
    const bool ngram_flags = ngram_size_n > 0 || ngram_size_m > 0 || ngram_min_hits > 0;
    if (ngram_flags && type != "ngram-simple")
      return invalid_argument("--spec-ngram-simple-*: these need --spec-type ngram-simple");
    if (!model_draft.empty() && type != "draft-simple")
      return invalid_argument("--spec-draft-model is for --spec-type draft-simple, not " +
                              (type.empty() ? std::string("none") : type));
    if (type.empty()) {
      if (draft_max > 0 || draft_min >= 0 || draft_p_min > 0.0f)
        return invalid_argument("--spec-type none: no proposer to give the draft flags to");
      c = SpeculativeConfig{};
      return Status::ok();
    }
    if (type == "draft-simple") {
      if (model_draft.empty())
        return invalid_argument("--spec-type draft-simple needs --spec-draft-model");
      c.method = Method::kDraftModel;
      c.model = model_draft;
      c.num_speculative_tokens = 4;
    } else if (type == "draft-mtp") {
      c.method = Method::kMtp;  // proposes one token per MTP layer unless --draft-max says
    } else {
      // llama.cpp's ngram-simple: the last N tokens matched, the M after the latest earlier
      // match proposed: loom's lookup with both bounds N.
      if (ngram_min_hits > 1)
        return invalid_argument("--spec-ngram-simple-min-hits " + std::to_string(ngram_min_hits) +
                                ": loom's n-gram lookup proposes after the first match (1)");
      const int32_t n = ngram_size_n > 0 ? ngram_size_n : 12;
      if (n > kMaxLookup)
        return invalid_argument("--spec-ngram-simple-size-n " + std::to_string(n) +
                                ": the lookup matches at most " + std::to_string(kMaxLookup) +
                                " tokens");
      const int32_t m = ngram_size_m > 0 ? ngram_size_m : 48;
      if (m > kMaxSpeculativeTokens)
        return invalid_argument("--spec-ngram-simple-size-m " + std::to_string(m) +
                                ": tokens proposed per step must be in [1, " +
                                std::to_string(kMaxSpeculativeTokens) + "]");
      if (draft_max > 0 && draft_max != m)
        return invalid_argument("--draft-max " + std::to_string(draft_max) +
                                " and --spec-ngram-simple-size-m " + std::to_string(m) +
                                " differ; give one of them");
      c.method = Method::kNgram;
      c.prompt_lookup_min = c.prompt_lookup_max = n;
      c.num_speculative_tokens = m;
    }
    return Status::ok();
  }

  // Set by add_to(): whether an option was given at all, its value aside.
  CLI::Option* config_option_ = nullptr;
  CLI::Option* model_draft_option_ = nullptr;
};

}  // namespace loom::spec
