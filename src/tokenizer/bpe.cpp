// Rank-driven BPE merging over token ids (byte-level GPT-2 style and HF Metaspace BPE).
#include <queue>

#include "tokenizer/models.h"
#include "tokenizer/unicode.h"

namespace loom::tok {

namespace {

struct Symbol {
  int32_t id;  // -1: not a token (cannot merge); -2: merged away
  int32_t prev, next;
  uint32_t start, n;
};

struct Pair {
  int32_t rank;
  int32_t left, right;
  int32_t left_id, right_id;
  int32_t result;
  bool operator<(const Pair& o) const {  // priority_queue: top = lowest rank, then leftmost
    return rank > o.rank || (rank == o.rank && left > o.left);
  }
};

}  // namespace

void bpe_encode_word(const Vocab& v, std::string_view word, std::vector<int32_t>* out) {
  if (word.empty()) return;
  if (v.ignore_merges) {
    int32_t id = v.find(word);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
  }

  std::vector<Symbol> sym;
  sym.reserve(word.size());
  const bool byte_fallback = v.kind == VocabKind::kBpeMerges && v.byte_fallback;
  for (size_t off = 0; off < word.size();) {
    uint32_t n = static_cast<uint32_t>(std::min(word.size() - off, utf8_seq_len(static_cast<uint8_t>(word[off]))));
    int32_t id = v.find(word.substr(off, n));
    if (id < 0 && byte_fallback) {
      // Each byte of an unknown character becomes its own <0xXX> symbol.
      for (uint32_t k = 0; k < n; ++k) {
        int32_t bid = v.byte_tokens[static_cast<uint8_t>(word[off + k])];
        sym.push_back({bid >= 0 ? bid : -1, 0, 0, static_cast<uint32_t>(off + k), 1});
      }
    } else {
      sym.push_back({id, 0, 0, static_cast<uint32_t>(off), n});
    }
    off += n;
  }
  const int32_t ns = static_cast<int32_t>(sym.size());
  for (int32_t i = 0; i < ns; ++i) {
    sym[i].prev = i - 1;
    sym[i].next = i + 1 < ns ? i + 1 : -1;
  }

  std::priority_queue<Pair> queue;
  auto try_add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0 || sym[l].id < 0 || sym[r].id < 0) return;
    auto it = v.merge_table.find(Vocab::pair_key(sym[l].id, sym[r].id));
    if (it == v.merge_table.end()) return;
    queue.push({it->second.rank, l, r, sym[l].id, sym[r].id, it->second.result});
  };
  for (int32_t i = 1; i < ns; ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    Pair p = queue.top();
    queue.pop();
    Symbol& l = sym[p.left];
    Symbol& r = sym[p.right];
    // Stale entry: a side merged since (its id changed) or they are no longer neighbours.
    if (l.id != p.left_id || r.id != p.right_id || l.next != p.right) continue;
    l.id = p.result;
    l.n += r.n;
    r.id = -2;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = p.left;
    try_add(l.prev, p.left);
    try_add(p.left, l.next);
  }

  for (int32_t i = 0; i != -1; i = sym[i].next) {
    if (sym[i].id >= 0) {
      out->push_back(sym[i].id);
    } else if (v.unk >= 0) {
      out->push_back(v.unk);
    }
  }
}

}  // namespace loom::tok
