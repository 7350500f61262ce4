// HttpRequest: the parts of a parsed HTTP request that routes look at (Beast stays inside
// http_connection.cpp).
#pragma once

#include <map>
#include <string>

namespace loom::server {

struct HttpRequest {
  std::string method;   // "GET", "POST", ...
  std::string path;     // target without the query string
  std::string query;    // after '?', "" if none
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;

  const std::string* header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? nullptr : &it->second;
  }
};

}  // namespace loom::server
