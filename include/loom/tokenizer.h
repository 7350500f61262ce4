// Public tokenizer API: text ⇄ token ids for GGUF vocabularies (SentencePiece-style "llama" and
// byte-level BPE "gpt2") and Hugging Face tokenizer.json files, plus an incremental
// detokenizer for streaming output. Internals live in src/tokenizer/.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace loom {

class GgufFile;
struct TokenizerImpl;

class Tokenizer {
 public:
  // From the tokenizer.ggml.* metadata of a GGUF file (a full model or a vocabulary-only file).
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const GgufFile& gguf);
  // From a directory holding tokenizer.json (and optionally tokenizer_config.json). The
  // eos_token_id of generation_config.json (of config.json when there is none, as
  // transformers derives it) joins the end-of-generation set.
  static Result<std::unique_ptr<Tokenizer>> from_hf_dir(const std::string& dir);
  // From the text of tokenizer.json / tokenizer_config.json / generation_config.json (the
  // latter two may be empty).
  static Result<std::unique_ptr<Tokenizer>> from_hf_json(
      std::string_view tokenizer_json, std::string_view tokenizer_config_json,
      std::string_view generation_config_json = {});
  // A GGUF file, a tokenizer.json file, or a directory holding tokenizer.json.
  static Result<std::unique_ptr<Tokenizer>> load(const std::string& path);

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // add_special: add BOS/EOS where the vocabulary asks for them.
  // parse_special: text matching a control token (e.g. "<|im_start|>") becomes that token;
  // otherwise it is tokenized as plain text. User-defined added tokens (HF added tokens with
  // special=false, GGUF token type user_defined) always match, as in llama.cpp and HF.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // Concatenated bytes of the tokens. skip_special drops control tokens (BOS, <|im_end|>, ...).
  // The result may end in an incomplete UTF-8 sequence only if the ids do.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // The bytes one token contributes to decoded text. at_start: the token is the first text
  // token of the output (SentencePiece-style vocabularies drop the leading space there).
  // Empty for an out-of-range id, or for a control token when skip_special is set.
  std::string token_piece(int32_t id, bool skip_special, bool at_start) const;

  // The token's string as stored in the vocabulary (e.g. "Ġthe", "▁the", "<0x0A>").
  std::string token_text(int32_t id) const;

  int32_t n_vocab() const;
  int32_t bos() const;  // -1 when the vocabulary has none
  int32_t eos() const;
  int32_t eot() const;
  int32_t pad() const;
  int32_t unk() const;
  bool add_bos() const;
  bool add_eos() const;
  // End of generation: the ids that end a completion without configuration (eos, eot, eom,
  // the generation config's eos_token_id list, and control tokens such as <end_of_turn>,
  // <|end|>, <|im_end|>, <|eot_id|>; src/tokenizer/end_of_generation.h has the rule).
  bool is_eog(int32_t id) const;
  std::span<const int32_t> eog_ids() const;  // sorted
  bool is_control(int32_t id) const;         // special/control token (skipped by skip_special)
  std::optional<int32_t> find_token(std::string_view piece) const;

 private:
  explicit Tokenizer(std::unique_ptr<TokenizerImpl> impl);
  std::unique_ptr<TokenizerImpl> impl_;
};

// Feed ids one at a time; each call returns only complete UTF-8 text. A multi-byte character
// split across tokens is held back until it completes; bytes that can never form valid UTF-8
// come out as U+FFFD, so the output is always valid UTF-8.
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special = false)
      : tok_(&tokenizer), skip_special_(skip_special) {}

  std::string push(int32_t id);
  // End of stream: returns what is still held back (an incomplete tail becomes U+FFFD).
  std::string finish();
  // Bytes held back waiting for the rest of a character.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tok_;
  bool skip_special_;
  bool at_start_ = true;
  std::string pending_;
};

}  // namespace loom
