// The speculative-decoding flags every command that runs the engine takes (serve, run, bench
// model, bench offline): vLLM's --speculative-config JSON and llama-server's --draft-max /
// --draft-min / --model-draft. Header-only over CLI11, so that the spec module itself does not
// link the command-line library.
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

  void add_to(CLI::App& app) {
    config_option_ =
        app.add_option("--speculative-config", config_json,
                       "speculative decoding, vLLM's JSON: '{\"method\": \"ngram\", "
                       "\"num_speculative_tokens\": 4, \"prompt_lookup_max\": 4, "
                       "\"prompt_lookup_min\": 2}', a draft model ('{\"model\": PATH, ...}') or "
                       "the model's own MTP layers ('{\"method\": \"mtp\", "
                       "\"num_speculative_tokens\": 2}'; its default: one per MTP layer) "
                       "(optional \"disable_by_batch_size\")");
    app.add_option("--draft-max,--draft,--draft-n", draft_max,
                   "tokens proposed per step (llama-server's name; alone it enables n-gram "
                   "lookup)")
        ->check(CLI::Range(1, 1 << 20));
    app.add_option("--draft-min,--draft-n-min", draft_min,
                   "proposals shorter than this are not verified")
        ->check(CLI::Range(0, 1 << 20));
    model_draft_option_ =
        app.add_option("--model-draft", model_draft,
                       "draft model with the target's vocabulary (GGUF, HF directory or "
                       "synth:PRESET); proposes --draft-max tokens per step (default 4)");
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
    if (!config_json.empty()) {
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
    if (draft_max > 0) c.num_speculative_tokens = draft_max;
    if (draft_min >= 0) c.draft_min = draft_min;
    return finalize_speculative_config(c);
  }

 private:
  // Set by add_to(): whether an option was given at all, its value aside.
  CLI::Option* config_option_ = nullptr;
  CLI::Option* model_draft_option_ = nullptr;
};

}  // namespace loom::spec
