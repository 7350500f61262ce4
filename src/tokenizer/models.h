// The two merge algorithms, applied to one pre-tokenized piece of text.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace loom::tok {

// SentencePiece-style BPE: repeatedly merge the adjacent pair whose concatenation is the
// highest-scoring token (ties: leftmost). Characters that are not tokens fall back to <0xXX>
// byte tokens (or unk). `text` is already ▁-escaped.
void spm_encode(const Vocab& v, std::string_view text, std::vector<int32_t>* out);

// Ranked-merge BPE over the characters of `word` (byte-level mapped for kBpeByteLevel):
// repeatedly apply the lowest-rank merge (ties: leftmost).
void bpe_encode_word(const Vocab& v, std::string_view word, std::vector<int32_t>* out);

}  // namespace loom::tok
