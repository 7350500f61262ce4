// MaskCache (mask_cache.h).
#include "structured/mask_cache.h"

#include <algorithm>

namespace loom::structured {

bool MaskCache::get(std::string_view key, std::span<uint32_t> words) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  lru_.splice(lru_.begin(), lru_, it->second);
  const std::vector<uint32_t>& w = it->second->words;
  std::copy(w.begin(), w.end(), words.begin());
  return true;
}

void MaskCache::put(std::string_view key, std::span<const uint32_t> words) {
  std::lock_guard<std::mutex> lock(mu_);
  if (capacity_ == 0 || index_.count(key)) return;
  if (lru_.size() >= capacity_) {  // reuse the oldest entry's buffers
    index_.erase(std::string_view(lru_.back().key));
    lru_.splice(lru_.begin(), lru_, std::prev(lru_.end()));
  } else {
    lru_.emplace_front();
  }
  Entry& e = lru_.front();
  e.key.assign(key);
  e.words.assign(words.begin(), words.end());
  index_.emplace(std::string_view(e.key), lru_.begin());
}

size_t MaskCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

}  // namespace loom::structured
