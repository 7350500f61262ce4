// Token tables shared across grammars and requests: one store per vocabulary (in
// TokenVocab::Impl), keyed by the canonical shape of the automaton a table was built from
// (token_table.h: table_shape). Every JSON schema has the same string body, number and
// whitespace rules, so their ~10 ms tables are built once per process instead of once per
// schema. Bounded by bytes, least recently used dropped; a dropped table stays alive in the
// CompiledGrammars that hold it.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "structured/count_profile.h"
#include "structured/token_table.h"

namespace loom::structured {

class TableStore {
 public:
  explicit TableStore(size_t budget_bytes = size_t{256} << 20);

  std::shared_ptr<const TokenTable> find(std::string_view shape);
  // Returns the table kept for `shape`: `table`, or the one another thread inserted first.
  std::shared_ptr<const TokenTable> insert(std::string_view shape,
                                           std::shared_ptr<const TokenTable> table);

  struct Stats {
    int64_t hits = 0, misses = 0, tables = 0, bytes = 0;
  };
  Stats stats() const;

 private:
  struct Entry {
    std::string shape;
    std::shared_ptr<const TokenTable> table;
    size_t bytes;
  };
  void evict_locked();

  const size_t budget_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;                                                    // most recent first
  std::unordered_map<std::string_view, std::list<Entry>::iterator> index_;  // views into lru_
  size_t bytes_ = 0;
  int64_t hits_ = 0, misses_ = 0;
};

// Count profiles (count_profile.h) shared across grammars and call sites by the shape of the
// position they profile (its key without the counted frame's count, and which frame): the
// counted rules of JSON formats and of a GBNF identifier recur across requests, and a profile
// costs a walk of the vocabulary (5-20 ms with Qwen3's). Bounded by bytes: when full it starts
// over (a dropped profile stays alive in the grammars that hold it).
class ProfileStore {
 public:
  explicit ProfileStore(size_t budget_bytes = size_t{64} << 20) : budget_(budget_bytes) {}
  std::shared_ptr<const CountProfile> find(const std::string& shape);
  // Returns the profile kept for `shape`: `p`, or the one another thread inserted first.
  std::shared_ptr<const CountProfile> insert(const std::string& shape,
                                             std::shared_ptr<const CountProfile> p);

 private:
  const size_t budget_;
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const CountProfile>> map_;
  size_t bytes_ = 0;
};

// Builds the tables every JSON grammar needs (string bodies, numbers, literals, whitespace)
// into the vocabulary's store, by walking a sample document through the any-JSON grammar,
// so that the first request with a JSON schema does not pay for them (~50 ms, once).
void prewarm_json_tables(const std::shared_ptr<const TokenVocab>& vocab);

}  // namespace loom::structured
