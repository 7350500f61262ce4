// Builds a Vocab from GGUF tokenizer.ggml.* metadata or from HF tokenizer.json text.
#pragma once

#include <string_view>

#include "base/status.h"
#include "tokenizer/vocab.h"

namespace loom {
class GgufFile;
}

namespace loom::tok {

Result<Vocab> vocab_from_gguf(const GgufFile& gguf);
Result<Vocab> vocab_from_hf(std::string_view tokenizer_json, std::string_view tokenizer_config_json);

}  // namespace loom::tok
