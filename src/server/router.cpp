// route_request (see router.h).
#include "server/router.h"

#include <cstring>
#include <exception>

#include "base/log.h"
#include "base/version.h"
#include "kernels/cpu/isa.h"
#include "server/auth.h"
#include "server/cors.h"
#include "server/jobs.h"
#include "server/routes.h"
#include "server/server_context.h"
#include "server/webui_assets.h"
#include "structured/matcher.h"

namespace loom::server {

namespace {

using Handler = void (*)(ServerContext&, const HttpRequest&, ResponderPtr);

void handle_health(ServerContext& ctx, const HttpRequest&, ResponderPtr out) {
  out->send(200, "application/json", "{}");
}

void handle_metrics(ServerContext& ctx, const HttpRequest&, ResponderPtr out) {
  std::string page = ctx.metrics.render(ctx.engine->metrics(), ctx.model_name, ctx.block_size);
  if (ctx.grammar_cache) {
    const structured::GrammarCache::Stats g = ctx.grammar_cache->stats();
    render_grammar_cache(g.hits, g.misses, ctx.model_name, &page);
  }
  out->send(200, "text/plain; version=0.0.4; charset=utf-8", page);
}

void handle_version(ServerContext&, const HttpRequest&, ResponderPtr out) {
  const BuildInfo& b = build_info();
  out->send(200, "application/json",
            dump_json(Json{{"version", b.version},
                           {"commit", b.commit},
                           {"compiler", b.compiler},
                           {"build_type", b.build_type},
                           {"kernels", kernels::kernels_name()}}));
}

struct Route {
  const char* method;  // GET routes answer HEAD too (the connection leaves the body out)
  const char* path;
  Handler handler;
  bool auth;            // protected by --api-key
  bool prefix = false;  // path is a prefix ("/v1/responses/" + id)
};

const Route kRoutes[] = {
    {"GET", "/health", handle_health, false},
    {"GET", "/metrics", handle_metrics, false},
    {"GET", "/version", handle_version, false},
    {"GET", "/v1/models", handle_models, true},
    {"GET", "/v1/models/", handle_model, true, true},
    {"POST", "/v1/completions", handle_completions, true},
    {"POST", "/v1/chat/completions", handle_chat_completions, true},
    {"POST", "/v1/messages", handle_messages, true},
    {"POST", "/v1/messages/count_tokens", handle_count_tokens, true},
    {"POST", "/tokenize", handle_tokenize, true},
    {"POST", "/detokenize", handle_detokenize, true},
    // Embeddings and rerank (embeddings_api.h); the rerank aliases are vLLM's and
    // llama-server's.
    {"POST", "/v1/embeddings", handle_embeddings, true},
    {"POST", "/v1/rerank", handle_rerank, true},
    {"POST", "/rerank", handle_rerank, true},
    {"POST", "/v2/rerank", handle_rerank, true},
    // Ollama's API (ollama_api.h).
    {"GET", "/api/version", handle_ollama_version, false},
    {"GET", "/api/tags", handle_ollama_tags, true},
    {"GET", "/api/ps", handle_ollama_ps, true},
    {"POST", "/api/show", handle_ollama_show, true},
    {"POST", "/api/generate", handle_ollama_generate, true},
    {"POST", "/api/chat", handle_ollama_chat, true},
    {"POST", "/api/embed", handle_ollama_embed, true},
    {"POST", "/api/embeddings", handle_ollama_embeddings, true},  // Ollama's legacy route
    // OpenAI's Responses API (responses_api.h).
    {"POST", "/v1/responses", handle_responses_create, true},
    {"GET", "/v1/responses/", handle_responses_get, true, true},
    {"DELETE", "/v1/responses/", handle_responses_delete, true, true},
};

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

// The error body of the API family a path belongs to, as its routes answer their own errors:
// Ollama's under /api/, Anthropic's under /v1/messages, OpenAI's elsewhere.
ErrorShape error_shape(const std::string& path) {
  if (path == "/api" || starts_with(path, "/api/")) return ErrorShape::kOllama;
  if (path == "/v1/messages" || starts_with(path, "/v1/messages/")) return ErrorShape::kAnthropic;
  return ErrorShape::kOpenAI;
}

}  // namespace

void route_request(ServerContext& ctx, const HttpRequest& req, std::shared_ptr<Responder> out) {
  // CORS preflights are the browser's, before the real request: no API key, no model needed.
  if (is_cors_preflight(req)) {
    const std::string failure = cors_preflight_failure(ctx.options.cors, req);
    if (failure.empty())
      out->send_with_headers(204, "", "", "");
    else
      out->send(400, "text/plain; charset=utf-8", "Disallowed CORS " + failure);
    return;
  }
  const bool head = req.method == "HEAD";
  const std::string method = head ? "GET" : req.method;
  const ErrorShape shape = error_shape(req.path);
  const Route* match = nullptr;
  std::string allow;  // the path's methods, for a 405's Allow header
  for (const Route& r : kRoutes) {
    if (r.prefix ? req.path.rfind(r.path, 0) != 0 || req.path.size() == std::strlen(r.path)
                 : req.path != r.path)
      continue;
    allow += (allow.empty() ? "" : ", ") + std::string(r.method);
    if (std::strcmp(r.method, "GET") == 0) allow += ", HEAD";
    if (method == r.method) match = &r;
  }
  // The chat page's files: static, so served without an API key and while the model loads.
  if (allow.empty() && ctx.options.webui) {
    if (!head && serve_web_asset(req, *out)) return;
    if (head) {
      HttpRequest get = req;
      get.method = "GET";
      if (serve_web_asset(get, *out)) return;
    }
  }
  // Without the page, / answers as Ollama's root does: liveness in plain text, which Ollama's
  // CLI probes (HEAD /) before it talks to a server.
  if (allow.empty() && !ctx.options.webui && req.path == "/") {
    if (method == "GET") {
      out->send(200, "text/plain; charset=utf-8", "loom is running");
      return;
    }
    const ApiError e = method_not_allowed(req.method, req.path);
    out->send_with_headers(e.status, "application/json", "Allow: GET, HEAD\r\n",
                           error_body(e, shape));
    return;
  }
  if (!match) {
    if (allow.empty()) return send_error(*out, route_not_found(req.method, req.path), shape);
    const ApiError e = method_not_allowed(req.method, req.path);
    out->send_with_headers(e.status, "application/json", "Allow: " + allow + "\r\n",
                           error_body(e, shape));
    return;
  }
  if (match->auth && !authorized(req, ctx.options.api_key)) {
    send_error(*out, unauthorized(), shape);
    return;
  }
  if (!ctx.ready.load()) {
    send_error(*out, overloaded("the model is still loading; retry when /health answers 200"),
               shape);
    return;
  }
  // Handlers report bad input as ApiErrors; an exception here is a bug, but it must cost one
  // request a 500, not the server.
  try {
    match->handler(ctx, req, out);
  } catch (const std::exception& e) {
    LOOM_LOG_ERROR("%s %s: unexpected exception: %s", req.method.c_str(), req.path.c_str(),
                   e.what());
    ApiError err;
    err.status = 500;
    err.type = "internal_error";
    err.message = std::string("internal error: ") + e.what();
    send_error(*out, err, shape);
  }
}

}  // namespace loom::server
