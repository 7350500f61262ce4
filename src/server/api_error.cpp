// ApiError constructors and JSON bodies.
#include "server/api_error.h"

#include "server/json_fields.h"

namespace loom::server {

ApiError bad_request(std::string message, std::string param) {
  ApiError e;
  e.status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = "400";
  return e;
}

ApiError model_not_found(const std::string& model) {
  ApiError e;
  e.status = 404;
  e.type = "NotFoundError";
  e.message = "The model `" + model + "` does not exist.";
  e.param = "model";
  e.code = "model_not_found";
  return e;
}

ApiError unauthorized() {
  ApiError e;
  e.status = 401;
  e.type = "authentication_error";
  e.message = "Invalid or missing API key (send 'Authorization: Bearer <key>' or 'x-api-key')";
  e.code = "invalid_api_key";
  return e;
}

ApiError overloaded(std::string message) {
  ApiError e;
  e.status = 503;
  e.type = "overloaded_error";
  e.message = std::move(message);
  e.code = "503";
  return e;
}

ApiError route_not_found(const std::string& method, const std::string& path) {
  ApiError e;
  e.status = 404;
  e.type = "not_found_error";
  e.message = "no route for " + method + " " + path;
  e.code = "404";
  return e;
}

ApiError method_not_allowed(const std::string& method, const std::string& path) {
  ApiError e;
  e.status = 405;
  e.message = "method " + method + " is not allowed for " + path;
  e.code = "405";
  return e;
}

ApiError body_too_large(size_t limit) {
  ApiError e;
  e.status = 413;
  e.message = "request body is larger than the limit of " + std::to_string(limit) + " bytes";
  e.code = "413";
  return e;
}

namespace {
Json null_or(const std::string& s) {
  return s.empty() ? Json() : Json(s);
}
std::string dump(const Json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}
}  // namespace

std::string openai_error_body(const ApiError& e) {
  Json j = {{"error",
             {{"message", e.message},
              {"type", e.type},
              {"param", null_or(e.param)},
              {"code", null_or(e.code)}}}};
  return dump(j);
}

std::string ollama_error_body(const ApiError& e) {
  return dump(Json{{"error", e.message}});
}

std::string anthropic_error_body(const ApiError& e) {
  Json j = {{"type", "error"},
            {"error",
             {{"type", e.type},
              {"message", e.message},
              {"param", null_or(e.param)},
              {"code", null_or(e.code)}}}};
  return dump(j);
}

std::string error_body(const ApiError& e, ErrorShape shape) {
  return shape == ErrorShape::kAnthropic ? anthropic_error_body(e)
         : shape == ErrorShape::kOllama  ? ollama_error_body(e)
                                         : openai_error_body(e);
}

}  // namespace loom::server
