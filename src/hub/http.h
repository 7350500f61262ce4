// HTTP GET over libcurl for the Hub client: small API answers into memory, and file downloads
// appended to a partial file (resumed with a Range request). Redirects are followed (the Hub
// sends LFS files to a CDN); curl drops the Authorization header when a redirect changes host.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"

namespace loom::hub {

struct HttpResponse {
  long status = 0;  // final HTTP status after redirects
  std::string body;
  std::string etag;         // ETag of the final response (quotes and W/ removed)
  std::string repo_commit;  // X-Repo-Commit, where the Hub sends one
  std::string next_url;     // Link: <...>; rel="next" (the Hub pages long listings)
};

struct HttpOptions {
  std::string bearer_token;  // "" = no Authorization header
  long connect_timeout_s = 30;
  // A transfer slower than 1 byte/s for this long is abandoned (a stalled connection).
  long stall_timeout_s = 60;
};

// GET `url` into memory (bodies up to `max_bytes`). A transport error is an io_error; an HTTP
// error status is returned in the response for the caller to explain.
Result<HttpResponse> http_get(const std::string& url, const HttpOptions& options,
                              size_t max_bytes = 64u << 20);

// Called as bytes arrive: bytes of the file present so far (including what was resumed from)
// and the expected total (0 = unknown).
using ProgressFn = std::function<void(uint64_t have, uint64_t total)>;

struct DownloadResult {
  long status = 0;        // 200, or 206 for a resumed transfer
  bool complete = false;  // the server's whole body arrived
  std::string error;      // the transport error, when not complete
};

// GET `url` and append the body to `path`, asking for `bytes=<size of path>-` when the file
// already holds a prefix. A 200 answer to a Range request restarts the file from zero.
Result<DownloadResult> http_download(const std::string& url, const HttpOptions& options,
                                     const std::string& path, uint64_t expected_total,
                                     const ProgressFn& progress);

}  // namespace loom::hub
