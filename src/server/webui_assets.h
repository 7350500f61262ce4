// The web chat page's files (web/), built into the binary: web/webui.cmake turns each into a
// byte array, raw and gzipped, in a generated source (webui_assets.cpp in the build tree).
// webui_routes.cpp serves them at / and /webui/...
#pragma once

#include <span>
#include <string_view>

#include "server/http_request.h"
#include "server/responder.h"

namespace loom::server {

struct WebAsset {
  std::string_view path;          // URL path: "/", "/webui/app.js", ...
  std::string_view content_type;  // from the file's extension
  std::string_view body;          // the file's bytes
  std::string_view gzip_body;     // the same, gzip-compressed
};

// Generated at build time.
std::span<const WebAsset> web_assets();

// Null when `path` is none of the page's files.
const WebAsset* find_web_asset(std::string_view path);

// Whether an Accept-Encoding value admits gzip ("gzip", "x-gzip" or "*" with a q above 0).
bool accepts_gzip(std::string_view accept_encoding);

// Answers `req` with a web asset (gzipped when the client accepts it; 405 for a method other
// than GET) and returns true, or returns false when its path is none of the page's files.
bool serve_web_asset(const HttpRequest& req, Responder& out);

}  // namespace loom::server
