// Writes a Hugging Face tokenizer (tokenizer.json + tokenizer_config.json) as GGUF
// tokenizer.ggml.* metadata, so that `loom convert` produces a self-contained GGUF whose
// vocabulary loads through vocab_from_gguf and encodes exactly like the HF original.
//
// Supported: byte-level BPE ("gpt2") whose pre-tokenizer regexes match one of the
// tokenizer.ggml.pre names loom (and llama.cpp) know, e.g. Qwen2/3 → "qwen2", Llama 3 →
// "llama-bpe", GPT-2 → "gpt-2". Anything else (an unknown regex, Metaspace/SentencePiece-style
// BPE, ByteLevel add_prefix_space) is an Unsupported error and nothing is written: a GGUF pre
// name is a promise about how text is split, and a wrong one would silently change token ids.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace loom {
class GgufWriter;
}

namespace loom::tok {

struct GgufTokenizerExport {
  std::string model;               // tokenizer.ggml.model written ("gpt2")
  std::string pre;                 // tokenizer.ggml.pre written
  int32_t n_tokens = 0;
  bool chat_template = false;      // tokenizer.chat_template written
  std::vector<std::string> notes;  // tokenizer details GGUF cannot carry
};

// From a directory holding tokenizer.json and optionally tokenizer_config.json (and
// chat_template.jinja). On error `out` is left untouched.
Result<GgufTokenizerExport> export_hf_tokenizer(const std::string& hf_dir, GgufWriter* out);

// From the file contents; tokenizer_config_json and chat_template_jinja may be empty.
Result<GgufTokenizerExport> export_hf_tokenizer_json(std::string_view tokenizer_json,
                                                     std::string_view tokenizer_config_json,
                                                     std::string_view chat_template_jinja,
                                                     GgufWriter* out);

}  // namespace loom::tok
