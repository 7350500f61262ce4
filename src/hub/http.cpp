#include "hub/http.h"

#include <curl/curl.h>
#include <sys/stat.h>

#include <cstdio>
#include <memory>
#include <mutex>

#include "base/version.h"

namespace loom::hub {
namespace {

void global_init_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using CurlPtr = std::unique_ptr<CURL, CurlDeleter>;
using SlistPtr = std::unique_ptr<curl_slist, SlistDeleter>;

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' ')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

// Response headers of the final hop: a redirect's headers are dropped when the next status
// line arrives.
struct Headers {
  std::string etag, repo_commit, next_url;
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* h = static_cast<Headers*>(user);
  const std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {
    *h = Headers{};
    return size * n;
  }
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return size * n;
  std::string name = line.substr(0, colon);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string value = trim(line.substr(colon + 1));
  if (name == "etag" || (name == "x-linked-etag")) {
    if (value.rfind("W/", 0) == 0) value = value.substr(2);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
      value = value.substr(1, value.size() - 2);
    // The Hub's X-Linked-Etag (an LFS file's sha256) wins over the CDN's ETag.
    if (name == "x-linked-etag" || h->etag.empty()) h->etag = value;
  } else if (name == "x-repo-commit") {
    h->repo_commit = value;
  } else if (name == "link" && value.find("rel=\"next\"") != std::string::npos) {
    const size_t open = value.find('<'), close = value.find('>');
    if (open != std::string::npos && close != std::string::npos && close > open)
      h->next_url = value.substr(open + 1, close - open - 1);
  }
  return size * n;
}

CurlPtr make_handle(const std::string& url, const HttpOptions& o, SlistPtr* headers) {
  global_init_once();
  CurlPtr c(curl_easy_init());
  if (!c) return c;
  CURL* h = c.get();
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, o.connect_timeout_s);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, o.stall_timeout_s);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  const std::string agent = "loom/" + build_info().version;
  curl_easy_setopt(h, CURLOPT_USERAGENT, agent.c_str());  // copied by curl
  curl_slist* list = nullptr;
  if (!o.bearer_token.empty())
    list = curl_slist_append(list, ("Authorization: Bearer " + o.bearer_token).c_str());
  headers->reset(list);
  if (list != nullptr) curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
  return c;
}

struct MemorySink {
  std::string* out;
  size_t max;
  bool overflow = false;
};

size_t on_memory(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<MemorySink*>(user);
  if (s->out->size() + size * n > s->max) {
    s->overflow = true;
    return 0;
  }
  s->out->append(data, size * n);
  return size * n;
}

}  // namespace

Result<HttpResponse> http_get(const std::string& url, const HttpOptions& options,
                              size_t max_bytes) {
  SlistPtr headers;
  CurlPtr c = make_handle(url, options, &headers);
  if (!c) return internal_error("curl_easy_init failed");
  HttpResponse r;
  MemorySink sink{&r.body, max_bytes};
  Headers h;
  curl_easy_setopt(c.get(), CURLOPT_WRITEFUNCTION, on_memory);
  curl_easy_setopt(c.get(), CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(c.get(), CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c.get(), CURLOPT_HEADERDATA, &h);
  const CURLcode rc = curl_easy_perform(c.get());
  if (sink.overflow) return io_error("GET " + url + ": answer larger than expected");
  if (rc != CURLE_OK) return io_error("GET " + url + ": " + curl_easy_strerror(rc));
  curl_easy_getinfo(c.get(), CURLINFO_RESPONSE_CODE, &r.status);
  r.etag = h.etag;
  r.repo_commit = h.repo_commit;
  r.next_url = h.next_url;
  return r;
}

namespace {

struct FileSink {
  CURL* handle = nullptr;
  std::string path;
  FILE* f = nullptr;
  uint64_t have = 0;      // bytes in the file
  uint64_t total = 0;     // expected size of the whole file
  bool decided = false;   // status of the final hop seen
  bool is_error = false;  // HTTP error: the body is kept in `error_body`, not the file
  std::string error_body;
  bool io_failed = false;
  const ProgressFn* progress = nullptr;
};

size_t on_file(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<FileSink*>(user);
  const size_t len = size * n;
  if (!s->decided) {
    s->decided = true;
    long status = 0;
    curl_easy_getinfo(s->handle, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 400) {
      s->is_error = true;
    } else if (status == 200 && s->have > 0) {
      // The server ignored the Range request: start the file again.
      if (std::fclose(s->f) != 0 || (s->f = std::fopen(s->path.c_str(), "wb")) == nullptr) {
        s->io_failed = true;
        return 0;
      }
      s->have = 0;
    }
  }
  if (s->is_error) {
    if (s->error_body.size() < 4096) s->error_body.append(data, len);
    return len;
  }
  if (std::fwrite(data, 1, len, s->f) != len) {
    s->io_failed = true;
    return 0;
  }
  s->have += len;
  if (*s->progress) (*s->progress)(s->have, s->total);
  return len;
}

}  // namespace

Result<DownloadResult> http_download(const std::string& url, const HttpOptions& options,
                                     const std::string& path, uint64_t expected_total,
                                     const ProgressFn& progress) {
  SlistPtr headers;
  CurlPtr c = make_handle(url, options, &headers);
  if (!c) return internal_error("curl_easy_init failed");
  FileSink sink;
  sink.handle = c.get();
  sink.path = path;
  sink.progress = &progress;
  sink.total = expected_total;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) sink.have = static_cast<uint64_t>(st.st_size);
  sink.f = std::fopen(path.c_str(), "ab");
  if (sink.f == nullptr) return io_error("cannot write " + path);
  std::string range;
  if (sink.have > 0) {
    range = std::to_string(sink.have) + "-";
    curl_easy_setopt(c.get(), CURLOPT_RANGE, range.c_str());
  }
  Headers h;
  curl_easy_setopt(c.get(), CURLOPT_WRITEFUNCTION, on_file);
  curl_easy_setopt(c.get(), CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(c.get(), CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c.get(), CURLOPT_HEADERDATA, &h);
  if (progress) progress(sink.have, sink.total);
  const CURLcode rc = curl_easy_perform(c.get());
  const bool close_failed = std::fclose(sink.f) != 0;
  if (sink.io_failed || close_failed) return io_error("writing " + path + " failed (disk full?)");
  DownloadResult r;
  curl_easy_getinfo(c.get(), CURLINFO_RESPONSE_CODE, &r.status);
  if (sink.is_error) {
    r.error = "HTTP " + std::to_string(r.status);
    return r;
  }
  r.complete = rc == CURLE_OK;
  if (!r.complete) r.error = curl_easy_strerror(rc);
  return r;
}

}  // namespace loom::hub
