// Responder: how a route answers, independent of the socket. A whole response (send) or a
// chunked SSE stream (begin_stream, write..., end_stream). Every method may be called from any
// thread (the connection posts the work to its strand), so the stream dispatcher can write
// without ever blocking an I/O thread.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "server/api_error.h"

namespace loom::server {

class Responder {
 public:
  virtual ~Responder() = default;
  virtual void send(int status, std::string content_type, std::string body) = 0;
  // send() with more header lines, each ending in "\r\n" (e.g. "Content-Encoding: gzip\r\n").
  virtual void send_with_headers(int status, std::string content_type, std::string extra_headers,
                                 std::string body) = 0;
  virtual void begin_stream(std::string content_type) = 0;  // 200, chunked
  virtual void write(std::string data) = 0;                 // one chunk of the stream
  virtual void end_stream() = 0;
  // Bytes accepted but not yet written to the socket (a slow reader makes this grow).
  virtual size_t pending_bytes() const = 0;
  // The client went away (read EOF or a failed write).
  virtual bool closed() const = 0;
  // `fn` runs once if the client disconnects before the response ended (at once if it
  // already has). Routes use it to abort the request and free its KV blocks.
  virtual void on_disconnect(std::function<void()> fn) = 0;
};

// Error bodies in the API's own shape.
inline void send_error(Responder& r, const ApiError& e, ErrorShape shape) {
  r.send(e.status, "application/json",
         shape == ErrorShape::kAnthropic ? anthropic_error_body(e)
         : shape == ErrorShape::kOllama  ? ollama_error_body(e)
                                         : openai_error_body(e));
}
inline void send_error(Responder& r, const ApiError& e, bool anthropic = false) {
  send_error(r, e, anthropic ? ErrorShape::kAnthropic : ErrorShape::kOpenAI);
}

}  // namespace loom::server
