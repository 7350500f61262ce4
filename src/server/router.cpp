// route_request (see router.h).
#include "server/router.h"

#include <exception>

#include "base/log.h"
#include "server/auth.h"
#include "server/jobs.h"
#include "server/routes.h"
#include "server/server_context.h"

namespace loom::server {

namespace {

using Handler = void (*)(ServerContext&, const HttpRequest&, ResponderPtr);

void handle_health(ServerContext& ctx, const HttpRequest&, ResponderPtr out) {
  out->send(200, "application/json", "{}");
}

void handle_metrics(ServerContext& ctx, const HttpRequest&, ResponderPtr out) {
  out->send(200, "text/plain; version=0.0.4; charset=utf-8",
            ctx.metrics.render(ctx.engine->metrics(), ctx.model_name, ctx.block_size));
}

void handle_version(ServerContext&, const HttpRequest&, ResponderPtr out) {
  out->send(200, "application/json", R"({"version":"loom"})");
}

struct Route {
  const char* method;
  const char* path;
  Handler handler;
  bool auth;       // protected by --api-key
  bool anthropic;  // errors in Anthropic's shape
};

const Route kRoutes[] = {
    {"GET", "/health", handle_health, false, false},
    {"GET", "/metrics", handle_metrics, false, false},
    {"GET", "/version", handle_version, false, false},
    {"GET", "/v1/models", handle_models, true, false},
    {"POST", "/v1/completions", handle_completions, true, false},
    {"POST", "/v1/chat/completions", handle_chat_completions, true, false},
    {"POST", "/v1/messages", handle_messages, true, true},
    {"POST", "/v1/messages/count_tokens", handle_count_tokens, true, true},
    {"POST", "/tokenize", handle_tokenize, true, false},
    {"POST", "/detokenize", handle_detokenize, true, false},
};

}  // namespace

void route_request(ServerContext& ctx, const HttpRequest& req, std::shared_ptr<Responder> out) {
  const Route* match = nullptr;
  bool path_known = false;
  for (const Route& r : kRoutes) {
    if (req.path != r.path) continue;
    path_known = true;
    if (req.method == r.method) match = &r;
  }
  if (!match) {
    send_error(*out, path_known ? method_not_allowed(req.method, req.path) : route_not_found(req.method, req.path));
    return;
  }
  if (match->auth && !authorized(req, ctx.options.api_key)) {
    send_error(*out, unauthorized(), match->anthropic);
    return;
  }
  if (!ctx.ready.load()) {
    send_error(*out, overloaded("the model is still loading; retry when /health answers 200"), match->anthropic);
    return;
  }
  // Handlers report bad input as ApiErrors; an exception here is a bug, but it must cost one
  // request a 500, not the server.
  try {
    match->handler(ctx, req, out);
  } catch (const std::exception& e) {
    LOOM_LOG_ERROR("%s %s: unexpected exception: %s", req.method.c_str(), req.path.c_str(), e.what());
    ApiError err;
    err.status = 500;
    err.type = "internal_error";
    err.message = std::string("internal error: ") + e.what();
    send_error(*out, err, match->anthropic);
  }
}

}  // namespace loom::server
