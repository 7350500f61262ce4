#include "bench/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <array>
#include <limits>

namespace loom::bench {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

std::string describe(const BaseUrl& url, const std::string& path, const beast::error_code& ec) {
  return url.str() + path + ": " + ec.message();
}

// Connects and sends one request; the stream's deadline covers the whole exchange.
Status connect_and_send(asio::io_context& ioc, beast::tcp_stream& stream, const BaseUrl& url, http::verb verb,
                        const std::string& path, const std::string& body, const HttpOptions& o,
                        const char* accept) {
  beast::error_code ec;
  tcp::resolver resolver(ioc);
  auto endpoints = resolver.resolve(url.host, url.port, ec);
  if (ec) return io_error("cannot resolve " + describe(url, path, ec));
  stream.expires_after(o.timeout);
  stream.connect(endpoints, ec);
  if (ec) return io_error("cannot connect to " + describe(url, path, ec));
  stream.socket().set_option(tcp::no_delay(true), ec);
  http::request<http::string_body> req{verb, url.prefix + path, 11};
  req.set(http::field::host, url.host + ":" + url.port);
  req.set(http::field::user_agent, "loom-bench");
  req.set(http::field::accept, accept);
  for (const auto& [k, v] : o.headers) req.set(k, v);
  if (verb == http::verb::post) {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
  }
  req.prepare_payload();
  http::write(stream, req, ec);
  if (ec) return io_error("cannot send request to " + describe(url, path, ec));
  return Status::ok();
}

Result<HttpResponse> call(const BaseUrl& url, http::verb verb, const std::string& path, const std::string& body,
                          const HttpOptions& o) {
  asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  LOOM_RETURN_IF_ERROR(connect_and_send(ioc, stream, url, verb, path, body, o, "*/*"));
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(1ull << 30);
  beast::error_code ec;
  http::read(stream, buffer, parser, ec);
  if (ec) return io_error("no complete answer from " + describe(url, path, ec));
  HttpResponse r;
  r.status = static_cast<int>(parser.get().result_int());
  r.body = std::move(parser.get().body());
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  return r;
}

}  // namespace

Result<BaseUrl> parse_base_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind("https://", 0) == 0)
    return unsupported("--base-url " + url + ": https is not supported; use plain http:// (e.g. behind a local proxy)");
  if (url.rfind(scheme, 0) != 0) return invalid_argument("--base-url must start with http:// (got '" + url + "')");
  std::string rest = url.substr(scheme.size());
  BaseUrl u;
  size_t slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  if (slash != std::string::npos) u.prefix = rest.substr(slash);
  while (!u.prefix.empty() && u.prefix.back() == '/') u.prefix.pop_back();
  if (!hostport.empty() && hostport[0] == '[') {  // [ipv6]:port
    size_t close = hostport.find(']');
    if (close == std::string::npos) return invalid_argument("--base-url " + url + ": unclosed '['");
    u.host = hostport.substr(1, close - 1);
    if (close + 1 < hostport.size()) {
      if (hostport[close + 1] != ':') return invalid_argument("--base-url " + url + ": expected ':' after ']'");
      u.port = hostport.substr(close + 2);
    }
  } else {
    size_t colon = hostport.rfind(':');
    u.host = hostport.substr(0, colon);
    if (colon != std::string::npos) u.port = hostport.substr(colon + 1);
  }
  if (u.host.empty()) return invalid_argument("--base-url " + url + " has no host");
  if (u.port.empty() || u.port.find_first_not_of("0123456789") != std::string::npos || u.port.size() > 5 ||
      std::stoi(u.port) > 65535)
    return invalid_argument("--base-url " + url + " has a bad port");
  return u;
}

Result<HttpResponse> http_get(const BaseUrl& url, const std::string& path, const HttpOptions& o) {
  return call(url, http::verb::get, path, "", o);
}

Result<HttpResponse> http_post_json(const BaseUrl& url, const std::string& path, const std::string& body,
                                    const HttpOptions& o) {
  return call(url, http::verb::post, path, body, o);
}

bool SseLineSplitter::feed(std::string_view bytes, BenchClock::time_point t, const SseCallback& on_data) {
  pending_.append(bytes.data(), bytes.size());
  size_t start = 0;
  bool keep_going = true;
  while (keep_going) {
    size_t nl = pending_.find('\n', start);
    if (nl == std::string::npos) break;
    std::string_view line(pending_.data() + start, nl - start);
    start = nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.substr(0, 5) != "data:") continue;
    line.remove_prefix(5);
    if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    keep_going = on_data(line, t);
  }
  pending_.erase(0, start);
  return keep_going;
}

Status http_post_sse(const BaseUrl& url, const std::string& path, const std::string& body, const HttpOptions& o,
                     const SseCallback& on_data, int* status, std::string* error_body) {
  asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  *status = 0;
  LOOM_RETURN_IF_ERROR(connect_and_send(ioc, stream, url, http::verb::post, path, body, o, "text/event-stream"));
  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  beast::error_code ec;
  http::read_header(stream, buffer, parser, ec);
  if (ec) return io_error("no answer from " + describe(url, path, ec));
  *status = static_cast<int>(parser.get().result_int());
  const bool ok = *status == 200;
  SseLineSplitter splitter;
  std::array<char, 16384> chunk;
  bool keep_going = true;
  while (!parser.is_done() && keep_going) {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    // read_some returns as soon as some body bytes are parsed, so each chunk is timed when it
    // arrives rather than when a buffer fills.
    http::read_some(stream, buffer, parser, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) return io_error("stream from " + describe(url, path, ec));
    const size_t n = chunk.size() - parser.get().body().size;
    if (n == 0) continue;
    if (!ok) {
      if (error_body->size() < (1u << 20)) error_body->append(chunk.data(), n);
      continue;
    }
    keep_going = splitter.feed(std::string_view(chunk.data(), n), BenchClock::now(), on_data);
  }
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  return Status::ok();
}

}  // namespace loom::bench
