// CORS preflights and response headers (see cors.h).
#include "server/cors.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <set>

namespace loom::server {

namespace {

bool contains(const std::vector<std::string>& list, const std::string& s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

bool any_origin(const CorsPolicy& p) {
  return contains(p.allowed_origins, "*");
}

bool origin_allowed(const CorsPolicy& p, const std::string& origin) {
  return any_origin(p) || contains(p.allowed_origins, origin);
}

// With credentials a browser refuses "*", so the origin is echoed (and caches must key on it).
std::string allow_origin_lines(const CorsPolicy& p, const std::string& origin) {
  std::string h;
  if (any_origin(p) && !p.allow_credentials) {
    h = "Access-Control-Allow-Origin: *\r\n";
  } else {
    h = "Access-Control-Allow-Origin: " + origin + "\r\nVary: Origin\r\n";
  }
  if (p.allow_credentials) h += "Access-Control-Allow-Credentials: true\r\n";
  return h;
}

}  // namespace

bool is_cors_preflight(const HttpRequest& req) {
  return req.method == "OPTIONS" && req.header("origin") &&
         req.header("access-control-request-method");
}

std::string cors_preflight_failure(const CorsPolicy& policy, const HttpRequest& req) {
  std::vector<std::string> failures;
  if (!origin_allowed(policy, *req.header("origin"))) failures.push_back("origin");
  const std::string& method = *req.header("access-control-request-method");
  if (!contains(policy.allowed_methods, "*") && !contains(policy.allowed_methods, method))
    failures.push_back("method");
  const std::string* requested = req.header("access-control-request-headers");
  if (requested && !contains(policy.allowed_headers, "*")) {
    // The CORS-safelisted headers are always allowed; names compare case-insensitively.
    std::set<std::string> allowed = {"accept", "accept-language", "content-language",
                                     "content-type"};
    for (const std::string& h : policy.allowed_headers) allowed.insert(lower(h));
    size_t pos = 0;
    while (pos <= requested->size()) {
      size_t comma = requested->find(',', pos);
      if (comma == std::string::npos) comma = requested->size();
      const std::string name = lower(trim(requested->substr(pos, comma - pos)));
      if (!name.empty() && !allowed.count(name)) {
        failures.push_back("headers");
        break;
      }
      pos = comma + 1;
    }
  }
  return join(failures);
}

std::string cors_headers(const CorsPolicy& policy, const HttpRequest& req) {
  const std::string* origin = req.header("origin");
  if (!origin) return "";
  if (!is_cors_preflight(req))
    return origin_allowed(policy, *origin) ? allow_origin_lines(policy, *origin) : "";
  if (!cors_preflight_failure(policy, req).empty()) return "";
  std::string h = allow_origin_lines(policy, *origin);
  h += "Access-Control-Allow-Methods: " +
       (contains(policy.allowed_methods, "*") ? "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT"
                                              : join(policy.allowed_methods)) +
       "\r\n";
  const std::string* requested = req.header("access-control-request-headers");
  if (contains(policy.allowed_headers, "*")) {
    if (requested) h += "Access-Control-Allow-Headers: " + *requested + "\r\n";
  } else {
    std::vector<std::string> names = {"Accept", "Accept-Language", "Content-Language",
                                      "Content-Type"};
    for (const std::string& n : policy.allowed_headers)
      if (std::none_of(names.begin(), names.end(),
                       [&](const std::string& s) { return lower(s) == lower(n); }))
        names.push_back(n);
    h += "Access-Control-Allow-Headers: " + join(names) + "\r\n";
  }
  h += "Access-Control-Max-Age: 600\r\n";
  return h;
}

Result<std::vector<std::string>> parse_cors_list(const std::string& flag, const std::string& json) {
  auto j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  const std::string expected = flag + " takes a JSON list of strings, e.g. '[\"*\"]' or " +
                               "'[\"https://app.example\"]'; got '" + json + "'";
  if (j.is_discarded() || !j.is_array()) return invalid_argument(expected);
  std::vector<std::string> out;
  for (const auto& e : j) {
    if (!e.is_string()) return invalid_argument(expected);
    const std::string s = e.get<std::string>();
    // A header line carries these values: CR or LF would let a flag split the response.
    if (s.find_first_of("\r\n") != std::string::npos) return invalid_argument(expected);
    out.push_back(s);
  }
  return out;
}

}  // namespace loom::server
