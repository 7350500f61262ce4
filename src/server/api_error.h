// ApiError: what a route answers when a request cannot be served, and the two JSON shapes it
// is written in (OpenAI's {"error": {...}} and Anthropic's {"type": "error", "error": {...}}).
// Every invalid request is a 4xx with one of these bodies, never a 500 or a dropped socket.
#pragma once

#include <string>

namespace loom::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";  // OpenAI / Anthropic error type
  std::string param;                           // offending field ("" = null)
  std::string code;                            // "" = null
};

ApiError bad_request(std::string message, std::string param = "");
ApiError model_not_found(const std::string& model);
ApiError unauthorized();
ApiError overloaded(std::string message);
ApiError route_not_found(const std::string& method, const std::string& path);
ApiError method_not_allowed(const std::string& method, const std::string& path);
ApiError body_too_large(size_t limit);

// {"error": {"message", "type", "param", "code"}}
std::string openai_error_body(const ApiError& e);
// {"type": "error", "error": {"type", "message"}} (plus param/code, which clients ignore)
std::string anthropic_error_body(const ApiError& e);
// Ollama's {"error": "message"}
std::string ollama_error_body(const ApiError& e);

// The error body shape of an API family.
enum class ErrorShape { kOpenAI, kAnthropic, kOllama };
std::string error_body(const ApiError& e, ErrorShape shape);

}  // namespace loom::server
