// authorized() (see auth.h).
#include "server/auth.h"

#include <cctype>

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
    // The scheme name is case-insensitive (RFC 7235 2.1): "bearer KEY" is as good.
    const std::string scheme = "bearer";
    bool bearer = h->size() > scheme.size() && ((*h)[scheme.size()] == ' ');
    for (size_t i = 0; bearer && i < scheme.size(); ++i)
      bearer = std::tolower(static_cast<unsigned char>((*h)[i])) == scheme[i];
    if (bearer) {
      const size_t key = h->find_first_not_of(' ', scheme.size());
      if (key != std::string::npos && equal_constant_time(h->substr(key), api_key)) return true;
    }
  }
  if (const std::string* h = req.header("x-api-key")) return equal_constant_time(*h, api_key);
  return false;
}

}  // namespace loom::server
