// Cross-origin requests (CORS) the way vLLM answers them (Starlette's CORSMiddleware behind
// --allowed-origins, --allowed-methods, --allowed-headers, --allow-credentials): preflights
// are answered before routing and without an API key, and every response to a request with
// an Origin header carries Access-Control-Allow-Origin when the origin is allowed.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "server/http_request.h"

namespace loom::server {

struct CorsPolicy {
  std::vector<std::string> allowed_origins{"*"};  // exact origins, or "*" for any
  std::vector<std::string> allowed_methods{"*"};  // "*": DELETE, GET, HEAD, OPTIONS, PATCH, ...
  std::vector<std::string> allowed_headers{"*"};  // "*": whatever the preflight asks for
  bool allow_credentials = false;
};

// An OPTIONS request with Origin and Access-Control-Request-Method.
bool is_cors_preflight(const HttpRequest& req);
// For a preflight: "" when allowed, else what is not ("origin", "method", "headers", joined
// with ", "), as Starlette's "Disallowed CORS ..." answer names it.
std::string cors_preflight_failure(const CorsPolicy& policy, const HttpRequest& req);
// The header lines ("Name: value\r\n") a response to `req` carries: the preflight's answer for
// an allowed preflight, Access-Control-Allow-Origin (and -Credentials) for an allowed origin,
// "" without an Origin header or for an origin not allowed.
std::string cors_headers(const CorsPolicy& policy, const HttpRequest& req);

// A flag's value: a JSON list of strings (vLLM's spelling, e.g. '["https://a.example"]').
// Errors name the flag and show what was expected.
Result<std::vector<std::string>> parse_cors_list(const std::string& flag, const std::string& json);

}  // namespace loom::server
