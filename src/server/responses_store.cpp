// ResponsesStore (see responses_store.h).
#include "server/responses_store.h"

namespace loom::server {

void ResponsesStore::put(const std::string& id, StoredResponse r, size_t capacity) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = by_id_.find(id); it != by_id_.end()) {
    lru_.erase(it->second);
    by_id_.erase(it);
  }
  if (capacity == 0) return;
  while (lru_.size() >= capacity) {
    by_id_.erase(lru_.back().first);
    lru_.pop_back();
  }
  lru_.emplace_front(id, std::move(r));
  by_id_[id] = lru_.begin();
}

std::optional<StoredResponse> ResponsesStore::get(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

bool ResponsesStore::erase(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return false;
  lru_.erase(it->second);
  by_id_.erase(it);
  return true;
}

size_t ResponsesStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

}  // namespace loom::server
