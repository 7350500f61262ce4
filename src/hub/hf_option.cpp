#include "hub/hf_option.h"

#include <CLI/CLI.hpp>

#include "hub/pull.h"

namespace loom::hub {

void add_hf_option(CLI::App& app, std::string* hf_spec) {
  app.add_option("--hf-repo", *hf_spec,
                 "-hf REPO[:QUANT]: pull the model from the Hugging Face Hub (e.g. "
                 "Qwen/Qwen3-0.6B-GGUF:Q8_0; cached in $HF_HOME/hub) and use it as --model");
}

Status resolve_hf_option(const std::string& hf_spec, std::string* model, bool model_required) {
  if (hf_spec.empty()) {
    if (model_required && model->empty())
      return invalid_argument("give the model: -m FILE|DIR|synth:PRESET or -hf REPO[:QUANT]");
    return Status::ok();
  }
  if (!model->empty()) return invalid_argument("give -m or -hf, not both");
  LOOM_ASSIGN_OR_RETURN(*model, pull_for_model_flag(hf_spec));
  return Status::ok();
}

}  // namespace loom::hub
