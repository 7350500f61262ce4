// GrammarCache: compiled grammars by (GBNF text, vocabulary), least recently used dropped.
#include <list>
#include <mutex>
#include <unordered_map>

#include "structured/grammar.h"
#include "structured/matcher.h"

namespace loom::structured {

struct GrammarCache::Impl {
  using Entry = std::pair<std::string, std::shared_ptr<const CompiledGrammar>>;  // key, value
  size_t capacity;
  mutable std::mutex mu;
  std::list<Entry> lru;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index;
  GrammarCache::Stats stats;
};

GrammarCache::GrammarCache(size_t capacity) : impl_(std::make_unique<Impl>()) {
  impl_->capacity = std::max<size_t>(capacity, 1);
}
GrammarCache::~GrammarCache() = default;

Result<std::shared_ptr<const CompiledGrammar>> GrammarCache::get(
    std::string_view gbnf, std::shared_ptr<const TokenVocab> vocab) {
  if (!vocab) return invalid_argument("GrammarCache: null vocabulary");
  std::string key = std::to_string(vocab->fingerprint()) + '\n';
  key += gbnf;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto it = impl_->index.find(key);
    if (it != impl_->index.end()) {
      impl_->lru.splice(impl_->lru.begin(), impl_->lru, it->second);
      ++impl_->stats.hits;
      return it->second->second;
    }
    ++impl_->stats.misses;
  }
  // Compiled outside the lock so that one slow grammar does not stall other requests.
  LOOM_ASSIGN_OR_RETURN(auto grammar, parse_gbnf(gbnf));
  LOOM_ASSIGN_OR_RETURN(auto compiled,
                        CompiledGrammar::create(std::move(grammar), std::move(vocab)));
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->index.find(key);
  if (it != impl_->index.end()) return it->second->second;
  impl_->lru.emplace_front(key, compiled);
  impl_->index.emplace(std::move(key), impl_->lru.begin());
  while (impl_->lru.size() > impl_->capacity) {
    impl_->index.erase(impl_->lru.back().first);
    impl_->lru.pop_back();
  }
  return compiled;
}

GrammarCache::Stats GrammarCache::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

size_t GrammarCache::size() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->lru.size();
}

}  // namespace loom::structured
