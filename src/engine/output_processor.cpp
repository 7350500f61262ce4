#include "engine/output_processor.h"

#include <algorithm>

namespace loom {

SeqTextState::SeqTextState(const Tokenizer* tokenizer, const SamplingParams& params)
    : tokenizer_(tokenizer),
      stop_(&params.stop),
      kept_special_(&params.kept_special_tokens),
      skip_special_(params.skip_special_tokens),
      include_stop_(params.include_stop_str_in_output) {
  if (tokenizer) detok_.emplace(*tokenizer, params.skip_special_tokens);
  for (const std::string& s : params.stop) max_stop_len_ = std::max(max_stop_len_, s.size());
}

std::optional<std::string> SeqTextState::add_token(int32_t token, bool check_stop) {
  if (final_ || !detok_) return std::nullopt;
  const size_t old_size = text_.size();
  if (skip_special_ && !kept_special_->empty() && tokenizer_->is_control(token) &&
      std::find(kept_special_->begin(), kept_special_->end(), tokenizer_->token_text(token)) !=
          kept_special_->end()) {
    // A parser marker: its text, after what came before (an unfinished character before a
    // marker can never complete; as without skipping, it becomes U+FFFD).
    text_ += detok_->finish();
    text_ += tokenizer_->token_piece(token, /*skip_special=*/false, /*at_start=*/false);
  } else {
    text_ += detok_->push(token);
  }
  if (!check_stop || max_stop_len_ == 0 || text_.size() == old_size) return std::nullopt;
  // A match must end in the new text, so it starts at most max_stop_len - 1 bytes earlier.
  const size_t from = old_size >= max_stop_len_ - 1 ? old_size - (max_stop_len_ - 1) : 0;
  size_t best = std::string::npos;
  const std::string* hit = nullptr;
  for (const std::string& s : *stop_) {
    const size_t p = text_.find(s, from);
    if (p != std::string::npos && p < best) {
      best = p;
      hit = &s;
    }
  }
  if (!hit) return std::nullopt;
  text_.resize(include_stop_ ? best + hit->size() : best);
  emitted_ = std::min(emitted_, text_.size());
  final_ = true;
  return *hit;
}

void SeqTextState::flush() {
  if (final_) return;
  if (detok_) text_ += detok_->finish();
  final_ = true;
}

size_t SeqTextState::held_back() const {
  if (final_) return 0;
  // The longest suffix of the text that is a proper prefix of some stop string. Stop strings
  // are valid UTF-8, so such a suffix starts on a character boundary.
  size_t hold = 0;
  for (const std::string& s : *stop_) {
    if (s.empty()) continue;
    const size_t max_k = std::min(s.size() - 1, text_.size() - emitted_);
    for (size_t k = max_k; k > hold; --k)
      if (text_.compare(text_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
  }
  return hold;
}

std::string SeqTextState::take_delta() {
  const size_t end = text_.size() - held_back();
  if (end <= emitted_) return {};
  std::string out = text_.substr(emitted_, end - emitted_);
  emitted_ = end;
  return out;
}

}  // namespace loom
