// Responses API routes (see responses_api.h): POST /v1/responses through the engine, and
// GET / DELETE /v1/responses/{id} for responses created with store: true.
#include "server/jobs.h"
#include "server/responses_api.h"
#include "server/responses_store.h"
#include "server/routes.h"
#include "server/server_context.h"

namespace loom::server {
namespace {

constexpr const char* kPrefix = "/v1/responses/";

ApiError response_not_found(const std::string& id) {
  ApiError e;
  e.status = 404;
  e.message = "Response with id '" + id +
              "' not found (responses are kept only when created with store: true, and only "
              "the latest --max-stored-responses)";
  e.code = "response_not_found";
  return e;
}

// The {id} of /v1/responses/{id}; "" when the path has more segments (no such route).
std::string response_id(const std::string& path) {
  std::string id = path.substr(std::string(kPrefix).size());
  return id.find('/') == std::string::npos ? id : "";
}

}  // namespace

void handle_responses_create(ServerContext& ctx, const HttpRequest& req, ResponderPtr out) {
  Json body;
  if (auto e = parse_json_object(req.body, &body)) return send_error(*out, *e);
  GenerationSpec spec;
  if (auto e = parse_responses_request(ctx, ctx.responses, body, &spec))
    return send_error(*out, *e);
  submit_generation(ctx, std::move(spec), std::move(out));
}

void handle_responses_get(ServerContext& ctx, const HttpRequest& req, ResponderPtr out) {
  const std::string id = response_id(req.path);
  if (id.empty()) return send_error(*out, route_not_found(req.method, req.path));
  // stream=true would replay the events; a stored response is returned whole.
  for (size_t pos = 0; pos < req.query.size();) {
    size_t end = req.query.find('&', pos);
    if (end == std::string::npos) end = req.query.size();
    const std::string param = req.query.substr(pos, end - pos);
    if (!param.empty() && param != "stream=false")
      return send_error(*out, bad_request("query parameter '" + param +
                                              "' is not supported (a stored response is "
                                              "returned whole, never streamed again)",
                                          param.substr(0, param.find('='))));
    pos = end + 1;
  }
  auto r = ctx.responses.get(id);
  if (!r) return send_error(*out, response_not_found(id));
  out->send(200, "application/json", dump_json(r->response));
}

void handle_responses_delete(ServerContext& ctx, const HttpRequest& req, ResponderPtr out) {
  const std::string id = response_id(req.path);
  if (id.empty()) return send_error(*out, route_not_found(req.method, req.path));
  if (!ctx.responses.erase(id)) return send_error(*out, response_not_found(id));
  out->send(200, "application/json",
            dump_json(Json{{"id", id}, {"object", "response.deleted"}, {"deleted", true}}));
}

}  // namespace loom::server
