// Listener and HttpConnection (see http_connection.h).
#include "server/http_connection.h"

#include <array>
#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <deque>
#include <optional>
#include <utility>

#include "base/log.h"

namespace loom::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

const char* status_text(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 413:
      return "Payload Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

class HttpConnection : public std::enable_shared_from_this<HttpConnection>, public Responder {
 public:
  HttpConnection(tcp::socket socket, const HttpLimits& limits, const RequestHandler& handler,
                 const ResponseHeaders& headers)
      : socket_(std::move(socket)),
        limits_(limits),
        handler_(handler),
        headers_(headers),
        drain_timer_(socket_.get_executor()),
        idle_timer_(socket_.get_executor()) {}

  void start() {
    asio::dispatch(socket_.get_executor(), [self = shared_from_this()] { self->do_read(); });
  }

  // ---- Responder (any thread) ----
  void send(int status, std::string content_type, std::string body) override {
    send_with_headers(status, std::move(content_type), "", std::move(body));
  }
  void send_with_headers(int status, std::string content_type, std::string extra_headers,
                         std::string body) override {
    if (status >= 400 && limits_.log_errors)
      LOOM_LOG_INFO("request %s %s: %d %.200s", method_.c_str(), path_.c_str(), status,
                    body.c_str());
    std::string head = "HTTP/1.1 " + std::to_string(status) + " " + status_text(status) + "\r\n";
    if (!content_type.empty()) head += "Content-Type: " + content_type + "\r\n";
    // 1xx, 204 and 304 answers have neither a body nor a Content-Length (RFC 7230 3.3.2).
    if (status < 200 || status == 204 || status == 304)
      body.clear();
    else
      head += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    head += extra_headers;
    // 503 is "loading" or "queue full": both pass, so clients that honour it back off briefly.
    if (status == 503) head += "Retry-After: 1\r\n";
    enqueue_head_then(std::move(head), std::move(body), /*ends=*/true);
  }
  void begin_stream(std::string content_type) override {
    std::string head = "HTTP/1.1 200 OK\r\nContent-Type: " + content_type +
                       "\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n";
    enqueue_head_then(std::move(head), "", /*ends=*/false);
  }
  void write(std::string data) override {
    if (data.empty()) return;
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    std::string chunk = size;
    chunk += data;
    chunk += "\r\n";
    enqueue(std::move(chunk), false);
  }
  void end_stream() override { enqueue("0\r\n\r\n", true); }
  size_t pending_bytes() const override { return pending_.load(std::memory_order_relaxed); }
  bool closed() const override { return closed_.load(); }
  void on_disconnect(std::function<void()> fn) override {
    asio::dispatch(socket_.get_executor(),
                   [self = shared_from_this(), fn = std::move(fn)]() mutable {
                     if (self->closed_ && self->response_active_) {
                       fn();
                       return;
                     }
                     self->on_disconnect_ = std::move(fn);
                   });
  }

 private:
  struct Out {
    std::string data;
    bool ends_response;
  };

  // The Connection header is decided on the strand (keep_alive_ may change there), as are the
  // request's own headers (CORS) and HEAD's missing body.
  void enqueue_head_then(std::string head, std::string body, bool ends) {
    pending_ += head.size() + body.size();
    asio::dispatch(socket_.get_executor(), [self = shared_from_this(), head = std::move(head),
                                            body = std::move(body), ends]() mutable {
      if (self->head_only_) {
        self->pending_ -= body.size();
        body.clear();
      }
      head += self->response_headers_;
      const char* conn =
          self->keep_alive_ ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
      self->pending_ += self->response_headers_.size() + std::strlen(conn);
      head += conn;
      head += body;
      self->push(Out{std::move(head), ends});
    });
  }
  void enqueue(std::string data, bool ends) {
    pending_ += data.size();
    asio::dispatch(socket_.get_executor(),
                   [self = shared_from_this(), data = std::move(data), ends]() mutable {
                     self->push(Out{std::move(data), ends});
                   });
  }
  // On the strand; pending_ already counts `out`.
  void push(Out out) {
    if (closed_) {
      pending_ -= out.data.size();
      return;
    }
    out_.push_back(std::move(out));
    if (!writing_) do_write();
  }
  void do_write() {
    writing_ = true;
    asio::async_write(
        socket_, asio::buffer(out_.front().data),
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); });
  }
  void on_write(beast::error_code ec) {
    writing_ = false;
    Out done = std::move(out_.front());
    out_.pop_front();
    pending_ -= done.data.size();
    if (ec || closed_) {
      peer_gone();
      for (const Out& o : out_) pending_ -= o.data.size();
      out_.clear();
      return;
    }
    if (done.ends_response) {
      response_active_ = false;
      if (drain_) {
        start_drain();
        return;
      }
      if (!keep_alive_) {
        shutdown();
        return;
      }
      // The next request, from what the peek buffered (pipelined) and then the socket. Only one
      // read may be pending on the socket: the peek is cancelled and its handler reads on.
      if (peek_pending_) {
        peek_cancelled_ = true;
        beast::error_code ignored;
        socket_.cancel(ignored);
      } else {
        do_read();
      }
    }
    if (!out_.empty()) do_write();
  }

  void do_read() {
    if (closed_) return;
    arm_idle_timer();
    parser_.emplace();
    parser_->body_limit(limits_.max_body_bytes);
    parser_->header_limit(static_cast<uint32_t>(limits_.max_header_bytes));
    http::async_read_header(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  // curl and others send "Expect: 100-continue" before a large body and wait for the go-ahead.
  void on_header(beast::error_code ec) {
    if (ec) {
      on_read(ec);
      return;
    }
    auto read_body = [self = shared_from_this()] {
      http::async_read(self->socket_, self->buffer_, *self->parser_,
                       [self](beast::error_code ec, size_t) { self->on_read(ec); });
    };
    const auto& h = parser_->get();
    auto expect = h.find(http::field::expect);
    if (expect != h.end() && beast::iequals(expect->value(), "100-continue") &&
        !parser_->is_done()) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      asio::async_write(socket_, asio::buffer(kContinue),
                        [self = shared_from_this(), read_body](beast::error_code ec, size_t) {
                          if (ec) {
                            self->shutdown();
                            return;
                          }
                          read_body();
                        });
      return;
    }
    read_body();
  }

  // Waiting for a request: the idle timeout runs until one has been read whole.
  void arm_idle_timer() {
    if (limits_.idle_timeout_s <= 0) return;
    idle_timer_.expires_after(std::chrono::seconds(limits_.idle_timeout_s));
    idle_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec || self->response_active_) return;  // cancelled, or a request came in
      self->shutdown();                          // the pending read ends with an error
    });
  }

  void on_read(beast::error_code ec) {
    idle_timer_.cancel();
    if (ec == http::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::connection_reset || ec == asio::error::operation_aborted) {
      shutdown();
      return;
    }
    if (ec) {
      keep_alive_ = false;
      response_active_ = true;
      head_only_ = false;
      response_headers_.clear();
      if (ec == http::error::body_limit) {
        drain_ = true;
        send_error(*this, body_too_large(limits_.max_body_bytes));
      } else if (ec == http::error::header_limit) {
        send_error(*this, bad_request("request headers are too large"));
      } else {
        send_error(*this, bad_request("malformed HTTP request: " + ec.message()));
      }
      return;
    }
    http::request<http::string_body> msg = parser_->release();
    parser_.reset();
    HttpRequest req;
    req.method = std::string(msg.method_string());
    std::string target(msg.target());
    size_t q = target.find('?');
    req.path = target.substr(0, q);
    method_ = req.method;  // for the error log line; one request at a time per connection
    path_ = req.path;
    if (q != std::string::npos) req.query = target.substr(q + 1);
    for (const auto& f : msg) {
      std::string name(f.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      req.headers[name] = std::string(f.value());
    }
    req.body = std::move(msg.body());
    keep_alive_ = msg.keep_alive();
    head_only_ = req.method == "HEAD";
    response_headers_ = headers_ ? headers_(req) : "";
    response_active_ = true;
    start_peek();
    handler_(req, shared_from_this());
  }

  // One read kept posted while the response is pending: EOF means the client left. What it
  // reads (pipelined requests) goes to the back of buffer_, parsed once the response is out.
  // It reads into a buffer of its own, appended on the strand, so no two reads ever write into
  // buffer_ (whose storage moves when it grows).
  void start_peek() {
    peek_pending_ = true;
    socket_.async_read_some(
        asio::buffer(peek_buf_),
        [self = shared_from_this()](beast::error_code ec, size_t n) { self->on_peek(ec, n); });
  }
  void on_peek(beast::error_code ec, size_t n) {
    peek_pending_ = false;
    const bool cancelled = std::exchange(peek_cancelled_, false);
    if (n > 0) buffer_.commit(asio::buffer_copy(buffer_.prepare(n), asio::buffer(peek_buf_, n)));
    if (closed_) return;
    if (ec && !(cancelled && ec == asio::error::operation_aborted)) {
      peer_gone();
      return;
    }
    if (!response_active_) {
      do_read();
      return;
    }
    // Past this much buffered, TCP holds back the rest until the response is out.
    if (buffer_.size() < limits_.max_header_bytes) start_peek();
  }

  void peer_gone() {
    if (closed_) return;
    closed_ = true;
    if (response_active_ && on_disconnect_) {
      auto fn = std::move(on_disconnect_);
      on_disconnect_ = nullptr;
      fn();
    }
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);  // an in-flight write fails and on_write drops the queue
    if (!writing_) {
      for (const Out& o : out_) pending_ -= o.data.size();
      out_.clear();
    }
  }

  void shutdown() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    socket_.close(ignored);
  }

  // After a 413: stop sending, read and discard the rest of the upload (bounded in bytes and
  // time) so the client sees the error rather than a connection reset.
  void start_drain() {
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    drain_timer_.expires_after(std::chrono::seconds(5));
    drain_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec) self->shutdown();
    });
    drain_some();
  }
  void drain_some() {
    scratch_.resize(64 << 10);
    socket_.async_read_some(asio::buffer(scratch_),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->drained_ += n;
                              if (ec || self->drained_ > (64u << 20)) {
                                self->drain_timer_.cancel();
                                self->shutdown();
                                return;
                              }
                              self->drain_some();
                            });
  }

  tcp::socket socket_;
  HttpLimits limits_;
  RequestHandler handler_;
  ResponseHeaders headers_;
  std::string method_ = "-", path_ = "-";  // of the request being answered  // a copy: connections
                                           // may outlive the Listener object
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::deque<Out> out_;
  std::atomic<size_t> pending_{0};
  std::atomic<bool> closed_{false};
  bool writing_ = false;
  bool keep_alive_ = true;
  bool response_active_ = false;
  bool peek_pending_ = false;
  bool peek_cancelled_ = false;   // by the end of the response: read on, not a hang-up
  bool head_only_ = false;        // answering HEAD: headers only
  std::string response_headers_;  // headers_(request) for the response being written
  std::array<char, 4096> peek_buf_;
  bool drain_ = false;
  size_t drained_ = 0;
  std::string scratch_;
  asio::steady_timer drain_timer_;
  asio::steady_timer idle_timer_;
  std::function<void()> on_disconnect_;
};

}  // namespace

Listener::Listener(asio::io_context& io, HttpLimits limits, RequestHandler handler,
                   ResponseHeaders headers)
    : io_(io),
      acceptor_(asio::make_strand(io)),
      limits_(limits),
      handler_(std::move(handler)),
      headers_(std::move(headers)) {}

Result<std::shared_ptr<Listener>> Listener::create(asio::io_context& io, const std::string& host,
                                                   uint16_t port, HttpLimits limits,
                                                   RequestHandler handler,
                                                   ResponseHeaders headers) {
  std::shared_ptr<Listener> l(new Listener(io, limits, std::move(handler), std::move(headers)));
  beast::error_code ec;
  auto addr = asio::ip::make_address(host, ec);
  if (ec) return invalid_argument("--host '" + host + "' is not an IP address: " + ec.message());
  tcp::endpoint ep(addr, port);
  l->acceptor_.open(ep.protocol(), ec);
  if (!ec) l->acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) l->acceptor_.bind(ep, ec);
  if (!ec) l->acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return io_error("cannot listen on " + host + ":" + std::to_string(port) + ": " + ec.message());
  l->port_ = l->acceptor_.local_endpoint().port();
  return l;
}

void Listener::run() {
  asio::dispatch(acceptor_.get_executor(), [self = shared_from_this()] { self->do_accept(); });
}

void Listener::close() {
  asio::post(acceptor_.get_executor(), [self = shared_from_this()] {
    beast::error_code ignored;
    self->acceptor_.close(ignored);
  });
}

void Listener::do_accept() {
  acceptor_.async_accept(asio::make_strand(io_), [self = shared_from_this()](beast::error_code ec,
                                                                             tcp::socket s) {
    if (ec == asio::error::operation_aborted || !self->acceptor_.is_open()) return;
    if (!ec) {
      beast::error_code ignored;
      s.set_option(tcp::no_delay(true), ignored);
      std::make_shared<HttpConnection>(std::move(s), self->limits_, self->handler_, self->headers_)
          ->start();
    } else {
      LOOM_LOG_WARN("accept failed: %s", ec.message().c_str());
    }
    self->do_accept();
  });
}

}  // namespace loom::server
