// Vocab: everything a tokenizer needs, independent of where it came from (GGUF metadata or a
// Hugging Face tokenizer.json). The loaders fill the public fields and call finalize().
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"

namespace loom::tok {

// GGUF tokenizer.ggml.token_type values.
enum class TokenType : uint8_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

enum class VocabKind {
  kSpm,           // SentencePiece-style: merge by score, ▁ for space, <0xXX> byte fallback
  kBpeByteLevel,  // GPT-2 byte-level BPE with ranked merges and pre-tokenizer regexes
  kBpeMerges,     // ranked merges over ▁-escaped text with byte fallback (HF Metaspace BPE)
};

// How a pre-tokenizer split keeps what its regex matched (HF Split "behavior").
enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext };

struct PreSplit {
  std::string regex;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool literal = false;  // the pattern is a plain string, not a regex
  bool invert = false;   // what matches is the gap, not the piece
};

struct TokenData {
  std::string text;
  float score = 0.0f;
  TokenType type = TokenType::kNormal;
  bool lstrip = false;  // an added token that eats whitespace on its left / right
  bool rstrip = false;
};

struct Vocab {
  VocabKind kind = VocabKind::kSpm;
  std::vector<TokenData> tokens;
  std::vector<PreSplit> pre_splits;  // applied in order; each splits every current piece
  // Merges as (left piece, right piece) in rank order.
  std::vector<std::pair<std::string, std::string>> merges;

  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, pad = -1;
  // More ids the model names as ending generation (HF generation_config.json eos_token_id).
  std::vector<int32_t> named_eog;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;            // prepend " " to text (SPM) / ▁ (Metaspace)
  bool escape_spaces = true;                // SPM / Metaspace: " " → ▁
  bool ignore_merges = false;               // a word that is itself a token is not merged (llama3)
  bool byte_fallback = true;                // unknown chars become <0xXX> tokens where they exist
  bool add_prefix_space_bytelevel = false;  // HF ByteLevel add_prefix_space

  // ---- derived by finalize() ----
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> token_to_id;
  // (left id, right id) → (rank, merged id); only merges whose pieces and result are tokens.
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  std::unordered_map<uint64_t, Merge> merge_table;
  int32_t byte_tokens[256];       // <0xXX> token per byte, or -1
  std::vector<int32_t> specials;  // control / user-defined / unknown tokens, longest first
  std::vector<int32_t> eog;       // end_of_generation_ids(): sorted

  Status finalize();
  int32_t find(std::string_view text) const {
    auto it = token_to_id.find(text);
    return it == token_to_id.end() ? -1 : it->second;
  }
  bool valid(int32_t id) const { return id >= 0 && id < static_cast<int32_t>(tokens.size()); }
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
};

// The pre-tokenizer regexes llama.cpp's converter records by name in tokenizer.ggml.pre.
// Returns false for a name loom does not know.
bool pre_splits_for_name(std::string_view pre, std::vector<PreSplit>* out, bool* ignore_merges);

}  // namespace loom::tok
