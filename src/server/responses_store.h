// The bounded in-memory store behind the Responses API's `store: true`: finished responses by
// id, each with the conversation it ends (its input items, those of the responses it continued,
// and its own output items), so that `previous_response_id` can continue it and
// GET / DELETE /v1/responses/{id} can serve it. Least recently used responses are dropped once
// the store holds `capacity` (loom serve --max-stored-responses); nothing is written to disk.
#pragma once

#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "server/json_fields.h"

namespace loom::server {

struct StoredResponse {
  Json response;  // the response object as POST returned it
  Json items;     // the conversation: input items then output items, in order
};

class ResponsesStore {
 public:
  // Thread-safe; capacity 0 keeps nothing.
  void put(const std::string& id, StoredResponse r, size_t capacity);
  // A copy (the store may drop the entry at any time); marks it most recently used.
  std::optional<StoredResponse> get(const std::string& id);
  bool erase(const std::string& id);
  size_t size() const;

 private:
  using Entry = std::pair<std::string, StoredResponse>;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> by_id_;
};

}  // namespace loom::server
