// Route handlers. Each runs on an I/O thread, parses and validates, then either answers at once
// or submits to the engine and hands a GenerationJob to the dispatcher.
#pragma once

#include <memory>

#include "server/http_request.h"
#include "server/openai_request.h"
#include "server/responder.h"

namespace loom::server {

struct ServerContext;
using ResponderPtr = std::shared_ptr<Responder>;

// openai_routes.cpp
void handle_completions(ServerContext& ctx, const HttpRequest& req, ResponderPtr out);
void handle_chat_completions(ServerContext& ctx, const HttpRequest& req, ResponderPtr out);
void handle_models(ServerContext& ctx, const HttpRequest& req, ResponderPtr out);
// GET /v1/models/{id}: the model object for the served id, else a 404 naming it.
void handle_model(ServerContext& ctx, const HttpRequest& req, ResponderPtr out);
// Submits every prompt of `spec` and starts the job (or answers with the error).
void submit_generation(ServerContext& ctx, GenerationSpec spec, ResponderPtr out);

// anthropic_route.cpp
void handle_messages(ServerContext& ctx, const HttpRequest& req, ResponderPtr out);
void handle_count_tokens(ServerContext& ctx, const HttpRequest& req, ResponderPtr out);

// ollama_routes.cpp (ollama_api.h)
void handle_ollama_version(ServerContext& ctx, const HttpRequest& req, ResponderPtr out);
void handle_ollama_tags(ServerContext& ctx, const HttpRequest& req, ResponderPtr out);
void handle_ollama_ps(ServerContext& ctx, const HttpRequest& req, ResponderPtr out);
void handle_ollama_show(ServerContext& ctx, const HttpRequest& req, ResponderPtr out);
void handle_ollama_generate(ServerContext& ctx, const HttpRequest& req, ResponderPtr out);
void handle_ollama_chat(ServerContext& ctx, const HttpRequest& req, ResponderPtr out);

// responses_routes.cpp (responses_api.h)
void handle_responses_create(ServerContext& ctx, const HttpRequest& req, ResponderPtr out);
// GET and DELETE /v1/responses/{id}
void handle_responses_get(ServerContext& ctx, const HttpRequest& req, ResponderPtr out);
void handle_responses_delete(ServerContext& ctx, const HttpRequest& req, ResponderPtr out);

// embeddings_routes.cpp (embeddings_api.h)
void handle_embeddings(ServerContext& ctx, const HttpRequest& req, ResponderPtr out);
void handle_ollama_embed(ServerContext& ctx, const HttpRequest& req, ResponderPtr out);
void handle_ollama_embeddings(ServerContext& ctx, const HttpRequest& req, ResponderPtr out);
void handle_rerank(ServerContext& ctx, const HttpRequest& req, ResponderPtr out);

// tokenize_routes.cpp
void handle_tokenize(ServerContext& ctx, const HttpRequest& req, ResponderPtr out);
void handle_detokenize(ServerContext& ctx, const HttpRequest& req, ResponderPtr out);

}  // namespace loom::server
