// TableStore (table_store.h) and the JSON prewarm.
#include "structured/table_store.h"

#include <vector>

#include "structured/frontends.h"
#include "structured/grammar.h"
#include "structured/matcher.h"

namespace loom::structured {

TableStore::TableStore(size_t budget_bytes) : budget_(budget_bytes) {}

std::shared_ptr<const TokenTable> TableStore::find(std::string_view shape) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(shape);
  if (it == index_.end()) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->table;
}

std::shared_ptr<const TokenTable> TableStore::insert(std::string_view shape,
                                                     std::shared_ptr<const TokenTable> table) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(shape);
  if (it != index_.end()) return it->second->table;
  const size_t bytes = table_bytes(*table) + shape.size();
  lru_.push_front({std::string(shape), table, bytes});
  index_.emplace(std::string_view(lru_.front().shape), lru_.begin());
  bytes_ += bytes;
  evict_locked();
  return table;
}

void TableStore::evict_locked() {
  while (bytes_ > budget_ && lru_.size() > 1) {
    Entry& e = lru_.back();
    bytes_ -= e.bytes;
    index_.erase(std::string_view(e.shape));
    lru_.pop_back();
  }
}

TableStore::Stats TableStore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {hits_, misses_, static_cast<int64_t>(lru_.size()), static_cast<int64_t>(bytes_)};
}

void prewarm_json_tables(const std::shared_ptr<const TokenVocab>& vocab) {
  // Every kind of JSON position at least once: strings (plain, with escapes), integers,
  // fractions and exponents, literals, nested containers, in compact form and with the
  // one space the tool-call grammars allow.
  static constexpr const char* kDoc =
      R"({"a": "x y\n\u00e9", "b": -12.5e+3, "c": [true, false, null, 0, {"d": []}], "e": {}})";
  for (const int ws : {0, 1}) {
    JsonGrammarOptions opt;
    opt.max_whitespace = ws;
    auto g = parse_gbnf(any_json_object_gbnf(opt));
    if (!g.is_ok()) return;
    auto cg = CompiledGrammar::create(*g, vocab);
    if (!cg.is_ok()) return;
    GrammarMatcher m(*cg);
    std::vector<uint32_t> words(bitmask_words(vocab->size()));
    const std::string_view doc(kDoc);
    for (size_t i = 0; i < doc.size(); ++i) {
      m.fill_next_token_bitmask(words);
      // Compact form: skip the spaces the grammar does not allow.
      if (!m.accept_bytes(doc.substr(i, 1)) && doc[i] != ' ') break;
    }
  }
}

}  // namespace loom::structured
