// end_of_generation_ids and implied_eot: see end_of_generation.h for the rule.
#include "tokenizer/end_of_generation.h"

#include <algorithm>

#include "tokenizer/vocab.h"

namespace loom::tok {

namespace {

bool is_special_with_text(const Vocab& v, std::string_view text, int32_t* id) {
  *id = v.find(text);
  if (*id < 0) return false;
  const TokenType t = v.tokens[*id].type;
  return t == TokenType::kControl || t == TokenType::kUserDefined;
}

// The <|end|> of a harmony vocabulary (end_of_generation.h), else -1.
int32_t harmony_message_end(const Vocab& v) {
  int32_t end, ret, call;
  if (is_special_with_text(v, "<|end|>", &end) && is_special_with_text(v, "<|return|>", &ret) &&
      is_special_with_text(v, "<|call|>", &call))
    return end;
  return -1;
}

}  // namespace

int32_t implied_eot(const Vocab& v) {
  // "<|endoftext|>" / "<|end_of_text|>" end a document, not a turn: they stay out of eot.
  const int32_t message_end = harmony_message_end(v);
  for (std::string_view t : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<EOT>"}) {
    int32_t id;
    if (is_special_with_text(v, t, &id) && id != message_end) return id;
  }
  return -1;
}

std::vector<int32_t> end_of_generation_ids(const Vocab& v) {
  std::vector<int32_t> out;
  for (int32_t id : {v.eos, v.eot, v.eom}) out.push_back(id);
  out.insert(out.end(), v.named_eog.begin(), v.named_eog.end());
  for (std::string_view t : kEndOfTurnTexts) {
    int32_t id;
    if (is_special_with_text(v, t, &id)) out.push_back(id);
  }
  const int32_t message_end = harmony_message_end(v);
  std::erase_if(out, [&](int32_t id) { return !v.valid(id) || id == message_end; });
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace loom::tok
