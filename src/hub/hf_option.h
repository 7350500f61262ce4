// `-hf REPO[:QUANT]` for every command that takes -m: the model is pulled from the Hugging Face
// Hub (served from the cache when it holds it) and its local path used as -m. Spelled -hf or
// -hfr on the command line as llama.cpp spells it; run_main rewrites those to --hf-repo because
// CLI11 reads a single dash as a one-letter option.
#pragma once

#include <string>

#include "base/status.h"

namespace CLI {
class App;
}

namespace loom::hub {

void add_hf_option(CLI::App& app, std::string* hf_spec);

// After parsing: with -hf, refuses -m given too, pulls, and sets *model to the local path.
// Without -hf and with `model_required`, an empty *model is an error naming both flags.
Status resolve_hf_option(const std::string& hf_spec, std::string* model, bool model_required);

}  // namespace loom::hub
