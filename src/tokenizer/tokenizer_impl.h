// TokenizerImpl: the state behind loom::Tokenizer (a finalized Vocab and its compiled
// pre-tokenizer).
#pragma once

#include "tokenizer/pretokenizer.h"
#include "tokenizer/vocab.h"

namespace loom {

struct TokenizerImpl {
  tok::Vocab vocab;
  tok::PreTokenizer pre;
  // Special tokens indexed by first byte, longest first, for the text scan.
  std::vector<int32_t> specials_by_byte[256];
};

}  // namespace loom
