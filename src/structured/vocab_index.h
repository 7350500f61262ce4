// TokenVocab's internals: token bytes plus the order the grammar engine walks them in.
// Normal tokens are sorted by their bytes with the length of the common prefix with the
// previous one, so a walk over the whole vocabulary reuses the parser state of shared
// prefixes (a byte trie flattened into an array) and skips every token below a dead prefix.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "structured/matcher.h"

namespace loom::structured {

class TableStore;  // table_store.h

struct TokenVocab::Impl {
  std::vector<std::string> bytes;
  std::vector<uint8_t> special;  // control tokens: only grammar literals may produce them
  std::vector<uint8_t> eos;
  std::vector<int32_t> eos_ids;
  uint64_t fingerprint = 0;

  std::vector<int32_t> sorted;   // normal tokens with bytes, sorted by bytes
  std::vector<uint16_t> lcp;     // lcp[i]: common prefix of sorted[i-1] and sorted[i]
  std::vector<int32_t> specials; // special, non-EOS tokens with text
  int32_t max_len = 0;           // longest token in bytes
  std::vector<int32_t> rank;     // rank[id]: position of id in `sorted`, -1 if not there
  std::vector<int32_t> by_len_desc;  // positions in `sorted`, longest token first
  std::vector<int32_t> n_longer;     // n_longer[L]: tokens in `sorted` longer than L, L <= max_len

  // Token tables of every grammar compiled for this vocabulary, shared by shape. Mutable
  // behind a const vocabulary: a cache, thread-safe, that never changes what a mask is.
  std::shared_ptr<TableStore> tables;
};

}  // namespace loom::structured
