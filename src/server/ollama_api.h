// Ollama's API (https://github.com/ollama/ollama/blob/main/docs/api.md) on the same engine,
// chat template and output parsers as the OpenAI and Anthropic routes:
//   GET /api/version, GET /api/tags, POST /api/show, GET /api/ps,
//   POST /api/generate and POST /api/chat (NDJSON streaming by default, `"stream": false` for
//   one object; `options` mapped to sampling parameters, `format` "json" or a JSON Schema,
//   `tools`, `think`; `context` ids carried between /api/generate calls).
// Errors are Ollama's {"error": "..."} with a 4xx status. An option loom cannot honour is a 400
// naming it (load-time options such as num_gpu or num_thread are the server's flags here).
#pragma once

#include "server/openai_request.h"

namespace loom::server {

struct ServerContext;

// Parse /api/generate or /api/chat into `spec` (kind kOllamaGenerate / kOllamaChat). A request
// with nothing to generate (an empty prompt, or no messages) only asks for the model to be
// loaded: *load_only is set and spec is unused.
std::optional<ApiError> parse_ollama_generate(const ServerContext& ctx, const Json& body,
                                              GenerationSpec* spec, bool* load_only);
std::optional<ApiError> parse_ollama_chat(const ServerContext& ctx, const Json& body,
                                          GenerationSpec* spec, bool* load_only);

// keep_alive as Ollama parses it: a number of seconds or a Go duration string ("5m", "1h30m",
// "300ms"; negative = forever, 0 = unload at once). loom keeps its one model loaded for the
// server's life, which any valid value allows; an invalid one is a 400 naming keep_alive.
std::optional<ApiError> check_keep_alive(const Json* keep_alive);

// Ollama requires "model" on every generation, chat, embed and show request.
std::optional<ApiError> require_ollama_model(const Json& body);

// "2026-12-02T09:10:11.123456789Z", as Ollama writes created_at.
std::string ollama_timestamp();

}  // namespace loom::server
