// authorized() (see auth.h).
#include "server/auth.h"

namespace loom::server {

namespace {

// Time independent of where the strings differ (length still leaks, which is public anyway).
bool equal_constant_time(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

}  // namespace

bool authorized(const HttpRequest& req, const std::string& api_key) {
  if (api_key.empty()) return true;
  if (const std::string* h = req.header("authorization")) {
    const std::string prefix = "Bearer ";
    if (h->size() > prefix.size() && h->compare(0, prefix.size(), prefix) == 0 &&
        equal_constant_time(h->substr(prefix.size()), api_key))
      return true;
  }
  if (const std::string* h = req.header("x-api-key")) return equal_constant_time(*h, api_key);
  return false;
}

}  // namespace loom::server
