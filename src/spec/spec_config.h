// The speculative-decoding configuration as users write it: vLLM's --speculative-config JSON
// ({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, ...}) and
// llama-server's --draft-max / --draft-min, into loom::SpeculativeConfig (include/loom/engine.h).
#pragma once

#include <cstdint>
#include <string_view>

#include "base/status.h"
#include "loom/engine.h"

namespace loom::spec {

// Tokens proposed per step at most (num_speculative_tokens, --draft-max).
// 64: llama.cpp's ngram-simple proposes 48 by default.
constexpr int32_t kMaxSpeculativeTokens = 64;
// The longest n-gram lookup (prompt_lookup_max).
constexpr int32_t kMaxLookup = 64;

// Parses and checks the JSON object. Every key must be known and given once, with a value
// vLLM accepts (prompt_lookup_min / _max >= 1 and only for "ngram", disable_by_batch_size > 1);
// a method loom does not have (EAGLE, Medusa) is an error that names it, never a silent plain
// decode. num_speculative_tokens is required except for "mtp", where it stays 0 until the
// engine knows the model (finalize_speculative_config).
Result<SpeculativeConfig> parse_speculative_config(std::string_view json);

// Fills the defaults vLLM fills (an n-gram method with neither lookup bound gets 5..5; with
// one bound, the other equals it; "mtp" without num_speculative_tokens proposes as many tokens
// as the model has MTP layers, `n_mtp_layers`, once it is known: 0 leaves it unset) and checks
// the ranges.
Status finalize_speculative_config(SpeculativeConfig& c, int32_t n_mtp_layers = 0);

}  // namespace loom::spec
