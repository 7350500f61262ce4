// Builds a Vocab from GGUF tokenizer.ggml.* metadata or from HF tokenizer.json text.
#pragma once

#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/vocab.h"

namespace loom {
class GgufFile;
}

namespace loom::tok {

Result<Vocab> vocab_from_gguf(const GgufFile& gguf);
// named_eog: ids the model names as ending generation (generation_eos_ids), kept in
// Vocab::named_eog.
Result<Vocab> vocab_from_hf(std::string_view tokenizer_json, std::string_view tokenizer_config_json,
                            std::vector<int32_t> named_eog = {});

// eos_token_id of a generation_config.json / config.json text: absent or null (none), an id,
// or a list of ids (Llama 3.1: [128001, 128008, 128009]; Gemma 3: [1, 106]).
Result<std::vector<int32_t>> generation_eos_ids(std::string_view json_text);

}  // namespace loom::tok
