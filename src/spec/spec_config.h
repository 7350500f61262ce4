// The speculative-decoding configuration as users write it: vLLM's --speculative-config JSON
// ({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, ...}) and
// llama-server's --draft-max / --draft-min, into loom::SpeculativeConfig (include/loom/engine.h).
#pragma once

#include <string_view>

#include "base/status.h"
#include "loom/engine.h"

namespace loom::spec {

// Parses and checks the JSON object. Every key must be known; a method loom does not have
// (a draft model, EAGLE, MTP) is an error that names it, never a silent plain decode.
Result<SpeculativeConfig> parse_speculative_config(std::string_view json);

// Fills the defaults vLLM fills (an n-gram method with neither lookup bound gets 5..5; with
// one bound, the other equals it) and checks the ranges.
Status finalize_speculative_config(SpeculativeConfig& c);

}  // namespace loom::spec
