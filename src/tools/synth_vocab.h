// Tokenizer metadata for synthetic models: copied from a vocabulary GGUF (padded to the
// embedding size the way published checkpoints pad it) or, when no file fits, a generated
// SentencePiece-style placeholder that still tokenizes any text (byte fallback).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "format/gguf.h"

namespace loom {

struct SynthVocab {
  std::vector<std::pair<std::string, GgufValue>> kv;  // tokenizer.* keys
  int32_t n_vocab = 0;
  std::string source;  // human-readable origin, stored in the model's metadata
  bool placeholder = false;
};

// Copies every tokenizer.* key of `path`. pad_to > 0: append "[PAD<i>]" tokens (type
// unused) up to pad_to; a vocabulary larger than pad_to is an error.
Result<SynthVocab> load_synth_vocab(const std::string& path, int32_t pad_to);

// n_vocab >= 259 + control_tokens (3 specials + 256 byte tokens): <unk>=0, <s>=1, </s>=2,
// <0x00>..<0xFF>, then single characters and letter strings with decreasing scores, and
// control_tokens (a chat format's markers) as the last ids; with them, no space prefix (text
// right after a marker tokenizes as it reads).
Result<SynthVocab> placeholder_vocab(int32_t n_vocab,
                                     std::span<const std::string_view> control_tokens);

// Path of a vocabulary fixture (e.g. "ggml-vocab-qwen3.gguf"): $LOOM_VOCAB_DIR, then
// tests/data/vocab under the executable's directory or its parents, then under the current
// directory. "" when not found.
std::string find_vocab_fixture(std::string_view file_name);

}  // namespace loom
