// Output processing for one sequence: incremental detokenization and stop strings. Text that
// could be the start of a stop string is held back until the next tokens decide it, so a stop
// string split across tokens is caught and never leaked to the client. Token-level stops (EOS,
// stop_token_ids, max_tokens, context limit) are decided by the engine; this class only turns
// accepted tokens into safe-to-emit text. With skip_special_tokens, control tokens leave no text
// except those a chat output parser reads (SamplingParams::kept_special_tokens).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "loom/tokenizer.h"
#include "sampling/sampling_params.h"

namespace loom {

class SeqTextState {
 public:
  // tokenizer may be null: no text is produced (stop strings are then refused earlier).
  SeqTextState(const Tokenizer* tokenizer, const SamplingParams& params);

  // Appends a generated token's text. check_stop: stop strings are looked for (false before
  // min_tokens, as vLLM). Returns the matched stop string, after which the text is final.
  std::optional<std::string> add_token(int32_t token, bool check_stop);
  // The sequence ended for another reason: release held-back text and any incomplete UTF-8.
  void flush();
  // Text not yet handed out and safe to emit; the caller owns it afterwards.
  std::string take_delta();
  const std::string& text() const { return text_; }

 private:
  size_t held_back() const;

  const Tokenizer* tokenizer_;
  const std::vector<std::string>* stop_;
  const std::vector<std::string>* kept_special_;  // control tokens' texts kept when skipping
  bool skip_special_;
  bool include_stop_;
  std::optional<IncrementalDetokenizer> detok_;
  std::string text_;    // all text so far (cut at a stop string once one matched)
  size_t emitted_ = 0;  // bytes of text_ handed out
  size_t max_stop_len_ = 0;
  bool final_ = false;
};

}  // namespace loom
