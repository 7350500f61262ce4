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

}  // namespace

int32_t implied_eot(const Vocab& v) {
  // "<|endoftext|>" / "<|end_of_text|>" end a document, not a turn: they stay out of eot.
  for (std::string_view t : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<EOT>"}) {
    int32_t id;
    if (is_special_with_text(v, t, &id)) return id;
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
  std::erase_if(out, [&](int32_t id) { return !v.valid(id); });
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace loom::tok
