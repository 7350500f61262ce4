// Whole token masks by exact parser state, for the states whose masks are expensive: many
// context-dependent tokens walked with the real stack (an expression grammar's identifiers
// end in tokens that only the stacks below can reject). One per CompiledGrammar, shared by
// its matchers; keyed by the stacks' contents (states and counts down to the bottom), so two
// matchers in the same state share. Bounded; evicted entries' buffers are reused, so a warm
// cache does not allocate.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace loom::structured {

class MaskCache {
 public:
  explicit MaskCache(size_t capacity) : capacity_(capacity) {}
  // Copies the cached mask for `key` into words; false if none.
  bool get(std::string_view key, std::span<uint32_t> words);
  void put(std::string_view key, std::span<const uint32_t> words);
  size_t size() const;

 private:
  struct Entry {
    std::string key;
    std::vector<uint32_t> words;
  };
  const size_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;                                                    // most recent first
  std::unordered_map<std::string_view, std::list<Entry>::iterator> index_;  // views into lru_
};

}  // namespace loom::structured
