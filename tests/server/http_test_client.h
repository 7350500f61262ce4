// A small blocking HTTP/1.1 client over POSIX sockets for the server tests: whole requests
// (Content-Length or chunked responses), incremental reading of SSE streams, and raw bytes for
// malformed-request tests. Written independently of the server's Beast code on purpose.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace loom::test {

struct HttpResult {
  int status = 0;                              // 0: no response (connection failed / closed early)
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  nlohmann::json json() const {
    return nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  }
};

struct SseEvent {
  std::string event;  // "" when the event had no "event:" line
  std::string data;
};

// Splits an SSE body into events (blank-line separated; "data:" lines joined by '\n').
inline std::vector<SseEvent> parse_sse(const std::string& body) {
  std::vector<SseEvent> out;
  SseEvent cur;
  bool any = false;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t nl = body.find('\n', pos);
    if (nl == std::string::npos) nl = body.size();
    std::string line = body.substr(pos, nl - pos);
    pos = nl + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) {
      if (any) out.push_back(cur);
      cur = {};
      any = false;
      continue;
    }
    if (line.rfind("data:", 0) == 0) {
      std::string d = line.substr(5);
      if (!d.empty() && d[0] == ' ') d.erase(0, 1);
      if (!cur.data.empty()) cur.data += '\n';
      cur.data += d;
      any = true;
    } else if (line.rfind("event:", 0) == 0) {
      cur.event = line.substr(6);
      if (!cur.event.empty() && cur.event[0] == ' ') cur.event.erase(0, 1);
      any = true;
    }
  }
  if (any) out.push_back(cur);
  return out;
}

class TestConnection {
 public:
  explicit TestConnection(uint16_t port, int timeout_s = 60) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval tv{timeout_s, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) close();
  }
  ~TestConnection() { close(); }
  TestConnection(const TestConnection&) = delete;
  TestConnection& operator=(const TestConnection&) = delete;

  bool ok() const { return fd_ >= 0; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  bool send_all(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }

  bool send_request(const std::string& method, const std::string& path, const std::string& body,
                    const std::map<std::string, std::string>& headers = {},
                    bool keep_alive = false) {
    std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    for (const auto& [k, v] : headers) req += k + ": " + v + "\r\n";
    if (!headers.count("Content-Type")) req += "Content-Type: application/json\r\n";
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    req += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
    return send_all(req + body);
  }

  // Reads the status line and headers into `r`.
  bool read_head(HttpResult* r) {
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos)
      if (!fill()) return false;
    std::string head = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    size_t sp = head.find(' ');
    if (sp == std::string::npos) return false;
    r->status = std::atoi(head.c_str() + sp + 1);
    size_t pos = head.find("\r\n");
    while (pos != std::string::npos && pos < head.size()) {
      size_t next = head.find("\r\n", pos + 2);
      std::string line =
          head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
      size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string k = line.substr(0, colon);
        for (char& c : k) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        std::string v = line.substr(colon + 1);
        while (!v.empty() && v[0] == ' ') v.erase(0, 1);
        r->headers[k] = v;
      }
      pos = next;
    }
    chunked_ =
        r->headers.count("transfer-encoding") && r->headers["transfer-encoding"] == "chunked";
    remaining_ = r->headers.count("content-length") ? std::stoll(r->headers["content-length"]) : -1;
    if (r->status == 204 || r->status == 304) remaining_ = 0;  // never a body
    return true;
  }

  // The next piece of the body: a chunk (chunked) or whatever arrived; nullopt at the end.
  std::optional<std::string> next_piece() {
    if (chunked_) {
      size_t nl;
      while ((nl = buf_.find("\r\n")) == std::string::npos)
        if (!fill()) return std::nullopt;
      size_t size = std::strtoull(buf_.substr(0, nl).c_str(), nullptr, 16);
      buf_.erase(0, nl + 2);
      while (buf_.size() < size + 2)
        if (!fill()) return std::nullopt;
      std::string data = buf_.substr(0, size);
      buf_.erase(0, size + 2);
      if (size == 0) return std::nullopt;
      return data;
    }
    if (remaining_ == 0) return std::nullopt;
    if (buf_.empty() && !fill()) return std::nullopt;
    std::string data = buf_;
    if (remaining_ > 0 && static_cast<int64_t>(data.size()) > remaining_) data.resize(remaining_);
    buf_.erase(0, data.size());
    if (remaining_ > 0) remaining_ -= static_cast<int64_t>(data.size());
    return data;
  }

  // Reads the rest of the response.
  HttpResult read_response() {
    HttpResult r;
    if (!read_head(&r)) return r;
    while (auto p = next_piece()) r.body += *p;
    return r;
  }

  // True if the server closed the connection (reads EOF) within the timeout.
  bool closed_by_peer() {
    char c;
    return ::recv(fd_, &c, 1, 0) == 0;
  }

 private:
  bool fill() {
    char tmp[16384];
    ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  std::string buf_;
  bool chunked_ = false;
  int64_t remaining_ = -1;
};

inline HttpResult http_request(uint16_t port, const std::string& method, const std::string& path,
                               const std::string& body = "",
                               const std::map<std::string, std::string>& headers = {}) {
  TestConnection c(port);
  if (!c.ok() || !c.send_request(method, path, body, headers)) return {};
  return c.read_response();
}

inline HttpResult post_json(uint16_t port, const std::string& path, const nlohmann::json& body,
                            const std::map<std::string, std::string>& headers = {}) {
  return http_request(port, "POST", path, body.dump(), headers);
}

}  // namespace loom::test
