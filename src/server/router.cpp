// route_request (see router.h).
#include "server/router.h"

#include <cstring>
#include <exception>

#include "base/log.h"
#include "base/version.h"
#include "kernels/cpu/isa.h"
#include "server/auth.h"
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
  const char* method;
  const char* path;
  Handler handler;
  bool auth;            // protected by --api-key
  ErrorShape errors;    // the API family's error body
  bool prefix = false;  // path is a prefix ("/v1/responses/" + id)
};
constexpr ErrorShape kOpenAI = ErrorShape::kOpenAI, kAnthropic = ErrorShape::kAnthropic,
                     kOllama = ErrorShape::kOllama;

const Route kRoutes[] = {
    {"GET", "/health", handle_health, false, kOpenAI},
    {"GET", "/metrics", handle_metrics, false, kOpenAI},
    {"GET", "/version", handle_version, false, kOpenAI},
    {"GET", "/v1/models", handle_models, true, kOpenAI},
    {"POST", "/v1/completions", handle_completions, true, kOpenAI},
    {"POST", "/v1/chat/completions", handle_chat_completions, true, kOpenAI},
    {"POST", "/v1/messages", handle_messages, true, kAnthropic},
    {"POST", "/v1/messages/count_tokens", handle_count_tokens, true, kAnthropic},
    {"POST", "/tokenize", handle_tokenize, true, kOpenAI},
    {"POST", "/detokenize", handle_detokenize, true, kOpenAI},
    // Embeddings and rerank (embeddings_api.h); the rerank aliases are vLLM's and
    // llama-server's.
    {"POST", "/v1/embeddings", handle_embeddings, true, kOpenAI},
    {"POST", "/v1/rerank", handle_rerank, true, kOpenAI},
    {"POST", "/rerank", handle_rerank, true, kOpenAI},
    {"POST", "/v2/rerank", handle_rerank, true, kOpenAI},
    // Ollama's API (ollama_api.h).
    {"GET", "/api/version", handle_ollama_version, false, kOllama},
    {"GET", "/api/tags", handle_ollama_tags, true, kOllama},
    {"GET", "/api/ps", handle_ollama_ps, true, kOllama},
    {"POST", "/api/show", handle_ollama_show, true, kOllama},
    {"POST", "/api/generate", handle_ollama_generate, true, kOllama},
    {"POST", "/api/chat", handle_ollama_chat, true, kOllama},
    {"POST", "/api/embed", handle_ollama_embed, true, kOllama},
    // OpenAI's Responses API (responses_api.h).
    {"POST", "/v1/responses", handle_responses_create, true, kOpenAI},
    {"GET", "/v1/responses/", handle_responses_get, true, kOpenAI, true},
    {"DELETE", "/v1/responses/", handle_responses_delete, true, kOpenAI, true},
};

}  // namespace

void route_request(ServerContext& ctx, const HttpRequest& req, std::shared_ptr<Responder> out) {
  const Route* match = nullptr;
  bool path_known = false;
  for (const Route& r : kRoutes) {
    if (r.prefix ? req.path.rfind(r.path, 0) != 0 || req.path.size() == std::strlen(r.path)
                 : req.path != r.path)
      continue;
    path_known = true;
    if (req.method == r.method) match = &r;
  }
  // The chat page's files: static, so served without an API key and while the model loads.
  if (!path_known && ctx.options.webui && serve_web_asset(req, *out)) return;
  if (!match) {
    send_error(*out, path_known ? method_not_allowed(req.method, req.path)
                                : route_not_found(req.method, req.path));
    return;
  }
  if (match->auth && !authorized(req, ctx.options.api_key)) {
    send_error(*out, unauthorized(), match->errors);
    return;
  }
  if (!ctx.ready.load()) {
    send_error(*out, overloaded("the model is still loading; retry when /health answers 200"),
               match->errors);
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
    send_error(*out, err, match->errors);
  }
}

}  // namespace loom::server
