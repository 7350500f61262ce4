// The web chat page's routes (see webui_assets.h).
#include <cctype>
#include <cstdlib>
#include <string>

#include "server/api_error.h"
#include "server/webui_assets.h"

namespace loom::server {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

// The page only talks to its own server; model output is sanitised (DOMPurify) before it is
// inserted, and this policy is the second fence: no inline script, nothing from elsewhere.
constexpr const char* kPagePolicy =
    "Content-Security-Policy: default-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'\r\n";

}  // namespace

const WebAsset* find_web_asset(std::string_view path) {
  for (const WebAsset& a : web_assets())
    if (a.path == path) return &a;
  return nullptr;
}

bool accepts_gzip(std::string_view header) {
  while (!header.empty()) {
    const size_t comma = header.find(',');
    std::string_view item = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    const size_t semi = item.find(';');
    const std::string_view coding = trim(item.substr(0, semi));
    if (!iequals(coding, "gzip") && !iequals(coding, "x-gzip") && coding != "*") continue;
    double q = 1.0;
    if (semi != std::string_view::npos) {
      std::string_view param = trim(item.substr(semi + 1));
      if (param.size() > 2 && (param[0] == 'q' || param[0] == 'Q') && param[1] == '=')
        q = std::strtod(std::string(param.substr(2)).c_str(), nullptr);
    }
    if (q > 0.0) return true;
  }
  return false;
}

bool serve_web_asset(const HttpRequest& req, Responder& out) {
  const WebAsset* asset = find_web_asset(req.path);
  if (!asset) return false;
  if (req.method != "GET") {
    send_error(out, method_not_allowed(req.method, req.path));
    return true;
  }
  std::string headers =
      "Cache-Control: no-cache\r\nX-Content-Type-Options: nosniff\r\nVary: Accept-Encoding\r\n";
  if (asset->content_type.starts_with("text/html")) headers += kPagePolicy;
  const std::string* accept = req.header("accept-encoding");
  const bool gzip = accept && accepts_gzip(*accept);
  if (gzip) headers += "Content-Encoding: gzip\r\n";
  const std::string_view body = gzip ? asset->gzip_body : asset->body;
  out.send_with_headers(200, std::string(asset->content_type), std::move(headers),
                        std::string(body));
  return true;
}

}  // namespace loom::server
