// SentencePiece-style score-driven bigram merging (llama / phi-3 vocabularies).
#include <queue>

#include "tokenizer/models.h"
#include "tokenizer/unicode.h"

namespace loom::tok {

namespace {

struct Symbol {
  uint32_t start;
  uint32_t n;  // 0 = merged away
  int32_t prev, next;
};

struct Bigram {
  float score;
  int32_t left, right;
  uint32_t size;
  bool operator<(const Bigram& o) const {  // priority_queue: top = highest score, then leftmost
    return score < o.score || (score == o.score && left > o.left);
  }
};

void emit_bytes(const Vocab& v, std::string_view s, std::vector<int32_t>* out) {
  for (char c : s) {
    int32_t id = v.byte_tokens[static_cast<uint8_t>(c)];
    if (id < 0) id = v.unk;
    if (id >= 0) out->push_back(id);
  }
}

}  // namespace

void spm_encode(const Vocab& v, std::string_view text, std::vector<int32_t>* out) {
  if (text.empty()) return;
  std::vector<Symbol> sym;
  sym.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    uint32_t n = static_cast<uint32_t>(std::min(text.size() - off, utf8_seq_len(static_cast<uint8_t>(text[off]))));
    int32_t idx = static_cast<int32_t>(sym.size());
    sym.push_back({static_cast<uint32_t>(off), n, idx - 1, off + n == text.size() ? -1 : idx + 1});
    off += n;
  }

  std::priority_queue<Bigram> queue;
  auto try_add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    std::string_view s = text.substr(sym[l].start, sym[l].n + sym[r].n);
    int32_t id = v.find(s);
    if (id < 0) return;
    queue.push({v.tokens[id].score, l, r, static_cast<uint32_t>(s.size())});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(sym.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    Bigram b = queue.top();
    queue.pop();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    // Stale entry: one side has since merged with something else.
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  for (int32_t i = 0; i != -1; i = sym[i].next) {
    std::string_view s = text.substr(sym[i].start, sym[i].n);
    int32_t id = v.find(s);
    if (id >= 0) {
      out->push_back(id);
    } else {
      emit_bytes(v, s, out);  // only single characters can be missing: merges make tokens
    }
  }
}

}  // namespace loom::tok
