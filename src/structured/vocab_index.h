// TokenVocab's internals: token bytes plus the order the grammar engine walks them in.
// Normal tokens are sorted by their bytes with the length of the common prefix with the
// previous one, so a walk over the whole vocabulary reuses the parser state of shared
// prefixes (a byte trie flattened into an array) and skips every token below a dead prefix.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "structured/matcher.h"

namespace loom::structured {

class TableStore;    // table_store.h
class ProfileStore;  // table_store.h

struct TokenVocab::Impl {
  std::vector<std::string> bytes;
  std::vector<uint8_t> special;  // control tokens: only grammar literals may produce them
  std::vector<uint8_t> eos;
  std::vector<int32_t> eos_ids;
  uint64_t fingerprint = 0;

  std::vector<int32_t> sorted;    // normal tokens with bytes, sorted by bytes
  std::vector<uint16_t> lcp;      // lcp[i]: common prefix of sorted[i-1] and sorted[i]
  std::vector<int32_t> specials;  // special, non-EOS tokens with text
  int32_t max_len = 0;            // longest token in bytes
  // The bytes of `sorted`, concatenated in sort order: table builds read them sequentially
  // instead of chasing one std::string per token around the heap.
  std::string sorted_blob;
  std::vector<uint32_t> sorted_off;  // position p: sorted_blob[sorted_off[p], sorted_off[p + 1])
  std::string_view sorted_bytes(size_t p) const {
    return std::string_view(sorted_blob).substr(sorted_off[p], sorted_off[p + 1] - sorted_off[p]);
  }
  uint32_t first_end[256] = {};  // first_end[b]: end of the block of sorted tokens starting with b
  std::vector<int32_t> rank;     // rank[id]: position of id in `sorted`, -1 if not there
  std::vector<int32_t> by_len_desc;  // positions in `sorted`, longest token first
  std::vector<int32_t> n_longer;     // n_longer[L]: tokens in `sorted` longer than L, L <= max_len

  // Token tables of every grammar compiled for this vocabulary, shared by shape. Mutable
  // behind a const vocabulary: a cache, thread-safe, that never changes what a mask is.
  std::shared_ptr<TableStore> tables;
  // Count profiles likewise (count_profile.h), by the shape of the position they profile.
  std::shared_ptr<ProfileStore> profiles;
};

}  // namespace loom::structured
