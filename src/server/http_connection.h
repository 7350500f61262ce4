// HTTP/1.1 on Boost.Asio + Beast: a Listener accepting on one socket and one HttpConnection per
// client, all driven by a few I/O threads (no thread per connection). Each connection runs on
// its own strand; the route handler gets the connection as a Responder.
//
// While a response is pending the connection keeps one read posted on the socket, so a
// client that hangs up (even one waiting in the queue, or for a non-streaming answer) is seen
// at once and its request aborted. Bodies over the size limit get 413 and the rest of the
// upload is drained, so the client reads the error instead of a reset.
//
// Pipelined requests (several sent before the first answer, RFC 7230 6.3.2) are answered one
// after the other, in order: bytes that arrive while a response is pending wait in the
// connection's buffer (up to max_header_bytes; past that the socket is not read until the
// response is out) and are parsed once it has been written. HEAD is answered as its GET with
// the body left out (Content-Length kept).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "server/http_request.h"
#include "server/responder.h"

namespace loom::server {

using RequestHandler = std::function<void(const HttpRequest&, std::shared_ptr<Responder>)>;
// Header lines ("Name: value\r\n") added to every response to a request (CORS); may be null.
using ResponseHeaders = std::function<std::string(const HttpRequest&)>;

struct HttpLimits {
  size_t max_body_bytes = 8u << 20;
  size_t max_header_bytes = 64u << 10;
  // One info line per error response (4xx/5xx): method, path, status and the body's start.
  // Successful generation requests are logged when they finish (server/dispatcher.h).
  bool log_errors = true;
  // A connection that has not sent a whole request within this many seconds of opening or of
  // its last response is closed (a client holding sockets open costs nothing); 0: never.
  int idle_timeout_s = 60;
};

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  // Binds and listens; call run() to start accepting.
  static Result<std::shared_ptr<Listener>> create(boost::asio::io_context& io,
                                                  const std::string& host, uint16_t port,
                                                  HttpLimits limits, RequestHandler handler,
                                                  ResponseHeaders headers = nullptr);
  void run();
  void close();  // stop accepting (thread-safe)
  uint16_t port() const { return port_; }

 private:
  Listener(boost::asio::io_context& io, HttpLimits limits, RequestHandler handler,
           ResponseHeaders headers);
  void do_accept();
  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  HttpLimits limits_;
  RequestHandler handler_;
  ResponseHeaders headers_;
  uint16_t port_ = 0;
};

}  // namespace loom::server
