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
    app.add_option("--speculative-config", config_json,
                   "speculative decoding, vLLM's JSON: '{\"method\": \"ngram\", "
                   "\"num_speculative_tokens\": 4, \"prompt_lookup_max\": 4, "
                   "\"prompt_lookup_min\": 2}', a draft model ('{\"model\": PATH, ...}') or "
                   "the model's own MTP layers ('{\"method\": \"mtp\", "
                   "\"num_speculative_tokens\": 2}') (optional \"disable_by_batch_size\")");
    app.add_option("--draft-max,--draft", draft_max,
                   "tokens proposed per step (llama-server's name; alone it enables n-gram "
                   "lookup)")
        ->check(CLI::Range(1, 1 << 20));
    app.add_option("--draft-min", draft_min, "proposals shorter than this are not verified")
        ->check(CLI::Range(0, 1 << 20));
    app.add_option("--model-draft", model_draft,
                   "draft model with the target's vocabulary (GGUF, HF directory or "
                   "synth:PRESET); proposes --draft-max tokens per step (default 4)");
  }

  // Fills `c` from the flags given; an error names the flag.
  Status apply(SpeculativeConfig& c) const {
    if (!config_json.empty()) {
      LOOM_ASSIGN_OR_RETURN(c, parse_speculative_config(config_json));
      if (!model_draft.empty())
        return invalid_argument("--model-draft and --speculative-config: give one of them");
    } else if (!model_draft.empty()) {
      c.method = SpeculativeConfig::Method::kDraftModel;
      c.model = model_draft;
      c.num_speculative_tokens = 4;
    } else if (draft_max > 0) {
      c.method = SpeculativeConfig::Method::kNgram;
    } else if (draft_min >= 0) {
      return invalid_argument("--draft-min needs --draft-max or --speculative-config");
    }
    if (draft_max > 0) c.num_speculative_tokens = draft_max;
    if (draft_min >= 0) c.draft_min = draft_min;
    return finalize_speculative_config(c);
  }
};

}  // namespace loom::spec
