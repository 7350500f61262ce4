// API key check for --api-key: "Authorization: Bearer <key>" (OpenAI clients; the scheme in any
// case) or "x-api-key: <key>" (Anthropic clients), compared in constant time.
#pragma once

#include <string>

#include "server/http_request.h"

namespace loom::server {

// True when `api_key` is empty (no auth) or the request carries it.
bool authorized(const HttpRequest& req, const std::string& api_key);

}  // namespace loom::server
