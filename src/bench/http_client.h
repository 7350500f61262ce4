// A small blocking HTTP/1.1 client (Boost.Beast) for the load generator: whole-body calls for
// /v1/models, /tokenize, /metrics, and a streaming POST that hands each SSE `data:` payload to
// a callback together with the moment its bytes arrived. One connection per call, used from
// one thread: `loom bench serve` runs one thread per in-flight request (concurrency is bounded
// by the benchmark), so timing never waits on another request's parsing.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace loom::bench {

using BenchClock = std::chrono::steady_clock;

// http://host[:port][/prefix]; the prefix is prepended to every request path.
struct BaseUrl {
  std::string host;
  std::string port = "80";
  std::string prefix;  // "" or "/something" without a trailing slash
  std::string str() const { return "http://" + host + ":" + port + prefix; }
};

Result<BaseUrl> parse_base_url(const std::string& url);

struct HttpResponse {
  int status = 0;
  std::string body;
};

struct HttpOptions {
  std::vector<std::pair<std::string, std::string>> headers;  // extra request headers
  std::chrono::milliseconds timeout{std::chrono::hours(6)};  // whole exchange
};

// GET (body empty) or POST (body: JSON). A non-2xx answer is a response, not an error; errors
// are connection / protocol failures.
Result<HttpResponse> http_get(const BaseUrl& url, const std::string& path, const HttpOptions& o = {});
Result<HttpResponse> http_post_json(const BaseUrl& url, const std::string& path, const std::string& body,
                                    const HttpOptions& o = {});

// Called with each SSE `data:` payload (prefix and one leading space removed) and the time the
// bytes that completed it were read. Return false to stop reading.
using SseCallback = std::function<bool(std::string_view data, BenchClock::time_point t)>;

// POSTs `body` and streams the answer. *status gets the HTTP status; a non-200 answer's body
// goes to *error_body and no callback runs.
Status http_post_sse(const BaseUrl& url, const std::string& path, const std::string& body, const HttpOptions& o,
                     const SseCallback& on_data, int* status, std::string* error_body);

// Splits a byte stream into lines and reports `data:` payloads; other SSE fields (event:,
// id:, comments) are ignored. Exposed for tests.
class SseLineSplitter {
 public:
  // Feeds bytes; calls on_data for every complete data line. Returns false if a callback did.
  bool feed(std::string_view bytes, BenchClock::time_point t, const SseCallback& on_data);

 private:
  std::string pending_;
};

}  // namespace loom::bench
