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

std::shared_ptr<const CountProfile> ProfileStore::find(const std::string& shape) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(shape);
  return it == map_.end() ? nullptr : it->second;
}

std::shared_ptr<const CountProfile> ProfileStore::insert(const std::string& shape,
                                                         std::shared_ptr<const CountProfile> p) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, fresh] = map_.try_emplace(shape, p);
  if (!fresh) return it->second;
  bytes_ += profile_bytes(*p) + shape.size();
  if (bytes_ > budget_) {  // start over, keeping the newest
    map_.clear();
    map_.emplace(shape, p);
    bytes_ = profile_bytes(*p) + shape.size();
  }
  return p;
}

TableStore::Stats TableStore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {hits_, misses_, static_cast<int64_t>(lru_.size()), static_cast<int64_t>(bytes_)};
}

namespace {

// Fills a mask at every byte of `doc` (so every position's tables get built); spaces the
// grammar does not allow are skipped. Returns whether the whole document was accepted.
bool walk_document(const std::shared_ptr<const TokenVocab>& vocab, const std::string& gbnf,
                   std::string_view doc) {
  auto g = parse_gbnf(gbnf);
  if (!g.is_ok()) return false;
  auto cg = CompiledGrammar::create(*g, vocab);
  if (!cg.is_ok()) return false;
  GrammarMatcher m(*cg);
  std::vector<uint32_t> words(bitmask_words(vocab->size()));
  for (size_t i = 0; i < doc.size(); ++i) {
    m.fill_next_token_bitmask(words);
    if (!m.accept_bytes(doc.substr(i, 1)) && doc[i] != ' ') return false;
  }
  return m.can_end();
}

}  // namespace

void prewarm_json_tables(const std::shared_ptr<const TokenVocab>& vocab) {
  // Every kind of JSON position at least once: strings (plain, with escapes), integers,
  // fractions and exponents, literals, nested containers, in compact form and with the
  // one space the tool-call grammars allow.
  static constexpr const char* kDoc =
      R"({"a": "x y\n\u00e9", "b": -12.5e+3, "c": [true, false, null, 0, {"d": []}], "e": {}})";
  for (const int ws : {0, 1}) {
    JsonGrammarOptions opt;
    opt.max_whitespace = ws;
    walk_document(vocab, any_json_object_gbnf(opt), kDoc);
  }
  // A string with maxLength walked to its bound: the tables of a string body 0..max_len
  // characters from its bound are the same for every maxLength (table_shape counts
  // iterations left), and each costs up to a few ms. Then the string formats.
  const int32_t n = vocab->impl().max_len + 1;
  OrderedJson schema = {{"type", "object"},
                        {"properties",
                         {{"s", {{"type", "string"}, {"maxLength", n}}},
                          {"e", {{"type", "string"}, {"format", "email"}}},
                          {"t", {{"type", "string"}, {"format", "date-time"}}},
                          {"d", {{"type", "string"}, {"format", "date"}}},
                          {"u", {{"type", "string"}, {"format", "uuid"}}},
                          {"i", {{"type", "string"}, {"format", "ipv4"}}}}},
                        {"required", {"s", "e", "t", "d", "u", "i"}},
                        {"additionalProperties", false}};
  auto gbnf = json_schema_to_gbnf(schema);
  if (!gbnf.is_ok()) return;
  const std::string doc =
      R"({"s":")" + std::string(n, 'a') +
      R"(","e":"ab.cd@ef-gh.com","t":"2024-01-02T03:04:05.678Z","d":"2024-01-02",)"
      R"("u":"0123abcd-4567-89ef-0123-456789abcdef","i":"192.168.0.1"})";
  walk_document(vocab, *gbnf, doc);
}

}  // namespace loom::structured
